"""Reviser: repair one candidate using the confirmed findings only.

Sees the problem, the parent proof text and the confirmed findings (quote, severity,
explanation; no verifier identity, no counts, no rejected findings). Output contract: the
generator's sections (``## Proof``, ``## Final answer``, ``## Self-assessment``) plus
``## Response to findings`` saying, per finding, fixed or disputed and why.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated

from pydantic import Field

from solver.roles import generator
from solver.roles.base import Kind, RoleInputs
from solver.roles.proof import claimed_status, extract_proof
from solver.roles.verifier import ProofFinding, finding_keys

NAME = "reviser"
VARIANTS: tuple[str, ...] = ("standard",)
TEMPLATES: dict[str, tuple[str, str]] = {"standard": ("reviser/system.j2", "reviser/user.j2")}


class Inputs(RoleInputs):
    problem_statement: Annotated[str, Kind("problem_statement"), Field(min_length=1)]
    proof_text: Annotated[str, Kind("proof_text"), Field(min_length=1)]
    confirmed_findings: Annotated[str, Kind("confirmed_findings"), Field(min_length=1)]


class Output(generator.Output):
    """The generator's output plus the reply to each finding."""

    responses: str


CONSERVATIVE = Output(
    parsed=False,
    parse_note="no proof text",
    proof="",
    body="",
    final_answer=None,
    self_assessment="",
    responses="",
    claimed_status="unknown",
)


def parse(text: str) -> Output:
    """Never raises. A reply without proof text is :data:`CONSERVATIVE` (the revision
    failed; the lineage keeps its parent)."""
    parts = extract_proof(text)
    if not parts.body.strip():
        return CONSERVATIVE
    return Output(
        parsed=parts.followed_contract,
        parse_note="" if parts.followed_contract else "no '## Proof' section",
        proof=parts.proof,
        body=parts.body,
        final_answer=parts.final_answer,
        self_assessment=parts.self_assessment,
        responses=parts.responses,
        claimed_status=claimed_status(parts.self_assessment),
    )


_RANK = {"minor": 0, "major": 1, "critical": 2}

# Talk about the revision rather than mathematics: it would show verifiers and the selector
# that the proof was revised, and on what (they judge the proof as a contestant's).
_COMMENTARY = re.compile(
    r"\bfindings?\s+C\d+\b"
    r"|\b(?:fix(?:es|ed|ing)?|address(?:es|ed|ing)?|resolv(?:e|es|ed|ing))\s+"
    r"(?:C\d+\b|the\s+(?:findings?|issues?\s+raised|reviewers?))"
    r"|\b(?:reviewers?|verifiers?)\b"
    r"|\b(?:previous|earlier|original|prior)\s+(?:version|proof|draft|attempt)\b"
    r"|\bthis\s+revision\b|\brevised\s+(?:proof|version|argument)\b",
    re.IGNORECASE,
)


def commentary(proof: str) -> str | None:
    """The first passage of ``proof`` that talks about the revision (findings, reviewers,
    earlier versions), or None when the proof stands alone. A revision with such a passage
    is unusable (recorded as giving no proof), so no verifier or selector is shown it."""
    match = _COMMENTARY.search(proof)
    return match.group(0) if match else None


def merge_duplicates(findings: Sequence[ProofFinding]) -> list[ProofFinding]:
    """One finding per flaw: findings sharing a ``verifier.finding_keys`` key (two verifiers
    wording one flaw differently), or alike in every field, are merged into the first, at the
    most severe severity any of them has. Order of first appearance is kept."""
    merged: list[ProofFinding] = []
    keys: list[set[str]] = []
    for finding in findings:
        own = finding_keys(finding.location, finding.explanation)
        same = (finding.location.strip(), finding.explanation.strip())
        for index, kept in enumerate(merged):
            if own & keys[index] or same == (kept.location.strip(), kept.explanation.strip()):
                if _RANK[finding.severity] > _RANK[kept.severity]:
                    merged[index] = kept.model_copy(update={"severity": finding.severity})
                keys[index] |= own
                break
        else:
            merged.append(finding)
            keys.append(own)
    return merged


def format_findings(findings: Sequence[ProofFinding]) -> str:
    """Confirmed findings as the reviser is shown them: renumbered C1, C2, ... (so no verifier
    identity or report structure shows through), duplicates merged (``merge_duplicates``)."""
    blocks = [
        f"### Finding C{number} (severity: {finding.severity})\n"
        f"Location: {finding.location or '(not given)'}\n"
        f"Explanation: {finding.explanation or '(not given)'}"
        for number, finding in enumerate(merge_duplicates(findings), start=1)
    ]
    return "\n\n".join(blocks)
