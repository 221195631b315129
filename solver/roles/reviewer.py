"""Reviewer: confirm or reject each finding of one verifier report.

Sees the problem, the proof text and that one report. Output contract: a JSON object
``{"reviews": [{"id", "decision": "confirmed"|"rejected", "severity", "reason"}]}``. A finding
without a clear rejection is confirmed: that is the conservative reading of missing or broken
output, so :meth:`Output.decision_for` answers "confirmed" for any id it did not parse.

Only the JSON block can reject, and only with a bare rejection word as the decision ("rejected",
not "rejected, although it is a gap"). Prose can confirm a finding but never reject one: a
sentence like "F1 should not be rejected" mentions the word without meaning it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from solver.roles.base import Kind, RoleInputs, RoleOutput
from solver.roles.facts import ReviewFacts
from solver.roles.jsonblock import find_object, lower_keys
from solver.roles.proof import strip_thinking
from solver.roles.verifier import ProofFinding, Severity, normalise_severity

NAME = "reviewer"
VARIANTS: tuple[str, ...] = ("standard",)
TEMPLATES: dict[str, tuple[str, str]] = {"standard": ("reviewer/system.j2", "reviewer/user.j2")}

ReviewDecision = Literal["confirmed", "rejected"]


class Inputs(RoleInputs):
    problem_statement: Annotated[str, Kind("problem_statement"), Field(min_length=1)]
    proof_text: Annotated[str, Kind("proof_text"), Field(min_length=1)]
    verification_report: Annotated[str, Kind("verification_report"), Field(min_length=1)]


class Review(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    finding_id: str
    decision: ReviewDecision
    severity: Severity | None
    reason: str


class Output(RoleOutput):
    reviews: tuple[Review, ...]

    def decision_for(self, finding_id: str, severity: Severity = "major") -> Review:
        """The review of one finding; a finding the output did not address is confirmed with
        the severity the verifier gave it. Contradictory reviews of one id confirm it."""
        matching = [r for r in self.reviews if r.finding_id == finding_id]
        for review in matching:
            if review.decision == "confirmed":
                return review
        if matching:
            return matching[0]
        return Review(
            finding_id=finding_id,
            decision="confirmed",
            severity=severity,
            reason="not reviewed (confirmed by default)",
        )

    def facts(self, findings: Sequence[ProofFinding]) -> ReviewFacts:
        """This review of a report's ``findings``: which stand (at which severity), which
        fall. A finding the review did not address stands at the verifier's severity."""
        confirmed: list[str] = []
        rejected: list[str] = []
        severity: dict[str, str] = {}
        for finding in findings:
            review = self.decision_for(finding.id, finding.severity)
            if review.decision == "confirmed":
                confirmed.append(finding.id)
                severity[finding.id] = review.severity or finding.severity
            else:
                rejected.append(finding.id)
        return ReviewFacts(confirmed=confirmed, rejected=rejected, severity=severity)


CONSERVATIVE = Output(parsed=False, parse_note="no reviews", reviews=())


def confirmed_findings(
    findings: tuple[ProofFinding, ...], review: Output
) -> tuple[ProofFinding, ...]:
    """The findings of one report that its review confirmed (unaddressed ones included), with
    the severity the reviewer settled on. This, never the raw report, is what a reviser gets."""
    kept: list[ProofFinding] = []
    for finding in findings:
        decision = review.decision_for(finding.id, finding.severity)
        if decision.decision == "confirmed":
            severity = decision.severity or finding.severity
            kept.append(finding.model_copy(update={"severity": severity}))
    return tuple(kept)


_REJECT_WORDS: frozenset[tuple[str, ...]] = frozenset(
    {
        ("rejected",),
        ("reject",),
        ("dismissed",),
        ("invalid",),
        ("incorrect",),
        ("wrong",),
        ("false",),
        ("not", "confirmed"),
        ("not", "valid"),
    }
)


def _decision(value: object) -> ReviewDecision:
    """Rejected only when the whole decision is a rejection; anything else, booleans and
    hedged phrases included, confirms (the conservative reading)."""
    if isinstance(value, bool):
        return "confirmed"
    words = tuple(re.findall(r"[a-z]+", str(value).lower()))
    return "rejected" if words in _REJECT_WORDS else "confirmed"


def _reviews(raw: Any) -> tuple[Review, ...]:
    if not isinstance(raw, list):
        return ()
    reviews: list[Review] = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        data = lower_keys(item)
        ident = str(data.get("id", data.get("finding_id", data.get("finding", "")))).strip()
        if not ident:
            continue
        severity = data.get("severity")
        reviews.append(
            Review(
                finding_id=ident[:40],
                decision=_decision(data.get("decision", data.get("verdict", ""))),
                severity=None if severity in (None, "") else normalise_severity(severity),
                reason=str(data.get("reason", data.get("explanation", ""))).strip(),
            )
        )
    return tuple(reviews)


def _accept(value: dict[str, Any]) -> bool:
    keys = lower_keys(value)
    return "reviews" in keys or "decisions" in keys


_PROSE_CONFIRMED = re.compile(
    r"\b(F\d{1,4})\b[^\n]{0,40}?\bconfirmed\b(?:[^\w\n]{0,5}([^\n]{0,300}))?",
    re.IGNORECASE,
)


def parse(text: str) -> Output:
    """Never raises; see the module docstring for the contract."""
    visible = strip_thinking(text)
    found = find_object(visible, _accept)
    if found is not None:
        data = lower_keys(found)
        reviews = _reviews(data.get("reviews", data.get("decisions", [])))
        if reviews:
            return Output(parsed=True, reviews=reviews)
        return CONSERVATIVE.model_copy(update={"parse_note": "JSON block with no reviews"})
    # Prose only ever confirms (the default anyway); it is read to keep the reviewer's reasons.
    prose = [
        Review(finding_id=ident, decision="confirmed", severity=None, reason=reason.strip())
        for ident, reason in _PROSE_CONFIRMED.findall(visible)
    ]
    if prose:
        return Output(
            parsed=False,
            parse_note="no JSON block; prose confirmations only (prose never rejects)",
            reviews=tuple(prose),
        )
    return CONSERVATIVE
