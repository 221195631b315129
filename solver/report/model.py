"""The values a run report is made of (see :mod:`solver.report.load`): frozen where they are
finished, :class:`CallView` filled in as the journal is read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from solver._util.clock import seconds_between
from solver.loop.state import VersionStatus
from solver.records import (
    FACTS_ADAPTER,
    Facts,
    GradeFacts,
    NoFacts,
    Phase,
    ProofFacts,
    ReviewFacts,
    SelectionFacts,
    VerificationFacts,
)
from solver.run import RunCondition

CallViewStatus = Literal["planned", "running", "completed", "failed", "cancelled", "unfinished"]
TimelineKind = Literal["session", "decision", "failure", "finish", "endpoint"]


@dataclass
class CallView:
    """One model call of the run: what it was for, how it went, where its texts are."""

    seq: int
    call_id: str
    role: str
    variant: str
    phase: str
    lineage: str | None
    version: int | None
    target: str | None
    evaluation: bool
    planned_t: str
    started_t: str | None = None
    ended_t: str | None = None
    status: CallViewStatus = "planned"
    attempts: int = 0
    finish_reason: str | None = None
    truncated: bool = False
    parsed_ok: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    model_seconds: float = 0.0  # summed transport time of its attempts
    messages_blob: str | None = None
    text_blob: str | None = None
    reasoning_blob: str | None = None
    facts: Facts = field(default_factory=NoFacts)
    errors: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def seconds(self) -> float | None:
        """Wall time from its first request to its end; None while it has not ended."""
        if self.started_t is None or self.ended_t is None:
            return None
        return seconds_between(self.started_t, self.ended_t)

    @property
    def summary(self) -> str:
        """A few words on the call's result, from the facts the loop recorded."""
        facts = self.facts
        if self.status != "completed":
            return self.status
        if self.truncated:
            return "truncated (finish: length)"
        if isinstance(facts, VerificationFacts):
            return verification_summary(facts)
        if isinstance(facts, ReviewFacts):
            return f"{len(facts.confirmed)} confirmed, {len(facts.rejected)} rejected"
        if isinstance(facts, GradeFacts):
            # A grader whose grade could not be read (truncated or unparsed) leaves None.
            return "ungraded" if facts.score is None else f"score {facts.score}/7"
        if isinstance(facts, SelectionFacts) and facts.choice is not None:
            lineage, version = facts.choice
            return f"chose {lineage} v{version}"
        if isinstance(facts, ProofFacts):
            return "proof" if facts.has_proof else "no proof"
        return "parsed" if self.parsed_ok else "not parsed"

    def facts_json(self) -> dict[str, Any]:
        """The facts as the journal holds them."""
        dumped: dict[str, Any] = FACTS_ADAPTER.dump_python(self.facts, mode="json")
        return dumped


def verification_summary(facts: VerificationFacts) -> str:
    """``fail: 2 findings (1 critical, 1 minor)``; a fail that lists none says so, since
    such a verdict names nothing to fix (it once read "fail, 0 findings")."""
    count = len(facts.findings)
    if count == 0:
        return "pass" if facts.verdict == "pass" else "fail, but no finding listed"
    severities: dict[str, int] = {}
    for finding in facts.findings:
        severities[finding.severity] = severities.get(finding.severity, 0) + 1
    detail = ", ".join(f"{n} {severity}" for severity, n in sorted(severities.items()))
    return f"{facts.verdict}: {count} finding{'s' if count != 1 else ''} ({detail})"


@dataclass(frozen=True)
class VersionView:
    version: int
    parent: int | None
    producer: str  # call id of the generator or reviser call
    status: VersionStatus
    proof_blob: str | None
    grade: int | None


@dataclass(frozen=True)
class LineageView:
    lineage: str
    status: Literal["accepted", "abandoned", "open"]
    detail: str
    versions: tuple[VersionView, ...]


@dataclass(frozen=True)
class TimelineEvent:
    t: str
    offset_s: float
    kind: TimelineKind
    text: str


@dataclass(frozen=True)
class RoleTotals:
    role: str
    calls: int
    input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    seconds: float  # summed wall time of its ended calls
    # The spread of one call's output (its median and largest, over calls that ended) and
    # the calls cut at their token limit: what a role's thinking budget is chosen from.
    median_output: int = 0
    max_output: int = 0
    cut: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class ProblemView(TypedDict):
    """The problem as the report shows it (its texts' presence, not the organisers' texts)."""

    id: str
    title: str | None
    source: str | None
    statement: str
    points: int
    digest: str
    has_reference: bool
    has_guidelines: bool


class SelectedView(TypedDict):
    """The proof the run selected: its version, whether it was accepted, its blob."""

    lineage: str
    version: int
    accepted: bool
    proof: str | None
    reason: str


class EvaluationView(TypedDict):
    """The evaluation graders' scores and how they were combined into the run's score."""

    scores: list[int | None]
    labels: list[str]  # a grade, "ungraded" (completed, no readable grade) or "-" (not ended)
    rejudged: list[str | None]
    reconciled: bool
    reconciled_score: int | None
    note: str
    score: int | None
    ungraded: bool  # the run finished and its final proof has no readable grade: scored 0


@dataclass(frozen=True)
class RunReport:
    run_dir: str
    run_id: str
    created: str
    state: RunCondition
    phase: Phase
    outcome: str | None
    reason: str
    problem: ProblemView
    model: str | None
    endpoint: str | None
    evaluation_mode: bool
    sessions: int
    wall_s: float
    selected: SelectedView | None
    proof_text: str | None
    evaluation: EvaluationView | None
    in_loop_score: int | None
    answer_check: dict[str, Any] | None
    lineages: tuple[LineageView, ...]
    calls: tuple[CallView, ...]
    timeline: tuple[TimelineEvent, ...]
    roles: tuple[RoleTotals, ...]
    tokens: dict[str, int]
    torn_tail: bool
    texts: dict[str, str] = field(default_factory=dict)  # blob digest -> display text
    # Tools the roles were offered and the tool calls made: competition rules for people
    # allow no computer, so a report says whether a proof was found with one
    tools: str = "none"

    def call(self, call_id: str) -> CallView | None:
        for call in self.calls:
            if call.call_id == call_id:
                return call
        return None

    def to_json(self) -> dict[str, Any]:
        """The report as JSON-able data (without the texts of prompts and responses)."""
        calls = []
        for call in self.calls:
            entry = {k: v for k, v in vars(call).items()}
            entry["facts"] = call.facts_json()
            entry["seconds"] = call.seconds
            entry["summary"] = call.summary
            calls.append(entry)
        return {
            "run_dir": self.run_dir,
            "run_id": self.run_id,
            "created": self.created,
            "state": self.state,
            "phase": self.phase,
            "outcome": self.outcome,
            "reason": self.reason,
            "problem": self.problem,
            "model": self.model,
            "endpoint": self.endpoint,
            "evaluation_mode": self.evaluation_mode,
            "sessions": self.sessions,
            "wall_s": round(self.wall_s, 3),
            "selected": self.selected,
            "proof_text": self.proof_text,
            "evaluation": self.evaluation,
            "in_loop_score": self.in_loop_score,
            "answer_check": self.answer_check,
            "lineages": [
                {
                    "lineage": ln.lineage,
                    "status": ln.status,
                    "detail": ln.detail,
                    "versions": [vars(v) for v in ln.versions],
                }
                for ln in self.lineages
            ],
            "calls": calls,
            "timeline": [vars(e) for e in self.timeline],
            "roles": [{**vars(r), "tokens": r.tokens} for r in self.roles],
            "tokens": self.tokens,
            "torn_tail": self.torn_tail,
            "tools": self.tools,
        }


def lineage_children(report: RunReport, lineage: str, version: int) -> list[CallView]:
    """The calls made on one version of a candidate, in order: verifications (each followed
    by its review), the in-loop grade, evaluation grades. Not the next version's producer."""
    on_version = [
        c
        for c in report.calls
        if c.lineage == lineage and c.version == version and c.role not in ("generator", "reviser")
    ]
    reviews = {c.target: c for c in on_version if c.role == "reviewer"}
    ordered: list[CallView] = []
    for call in on_version:
        if call.role == "reviewer" and call.target in {c.call_id for c in on_version}:
            continue  # listed right after the verification it reviews
        ordered.append(call)
        review = reviews.get(call.call_id)
        if review is not None:
            ordered.append(review)
    return ordered
