"""RunState = fold(journal records). Pure: no I/O, no clock, no blobs read.

Every field is derived from records alone, so a resumed run rebuilds exactly the state an
uninterrupted run had at the same record. ``apply`` must accept every record type the journal
may hold (the store's own types are ignored).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from solver.records import (
    ArtifactPut,
    CallCancelled,
    CallCompleted,
    CallFailed,
    CallPlanned,
    ContextBuilt,
    Decision,
    EndpointProbed,
    LlmAbandoned,
    LlmCompleted,
    LlmFailed,
    LlmStarted,
    LoopRecord,
    RunFinished,
    SessionEnded,
    SessionStarted,
)


@dataclass
class CallState:
    call_id: str
    role: str
    variant: str
    phase: str
    lineage: str | None
    version: int | None
    target: str | None
    evaluation: bool
    status: str = "planned"  # planned | completed | failed | cancelled
    attempts: int = 0
    open_attempt: int | None = None  # an attempt started and not ended
    has_context: bool = False
    truncated: bool = False
    parsed_ok: bool = False
    finish_reason: str = ""
    facts: dict[str, Any] = field(default_factory=dict)
    output_blob: str | None = None
    tokens: int = 0
    # The raw response of an attempt that completed; a call killed after this is finished
    # from the recorded bytes on resume, never paid for twice.
    response_blob: str | None = None
    response_api: str = ""
    response_streamed: bool = True
    attempt_streams: dict[int, tuple[str, bool]] = field(default_factory=dict)


@dataclass
class ArtifactInfo:
    artifact: str
    kind: str
    blob: str
    size: int
    producer: str
    lineage: str | None
    version: int | None


@dataclass
class VersionState:
    lineage: str
    version: int
    producer: str  # call id of the generator or reviser call
    parent: int | None
    proof_artifact: str | None = None
    status: str = "open"  # open | accepted | failed | unusable


@dataclass
class LineageState:
    lineage: str
    index: int
    versions: dict[int, VersionState] = field(default_factory=dict)
    consecutive_failures: int = 0
    accepted_version: int | None = None
    abandoned: bool = False
    abandon_reason: str = ""
    confirmed_keys: set[str] = field(default_factory=set)

    @property
    def latest(self) -> VersionState | None:
        return self.versions[max(self.versions)] if self.versions else None

    @property
    def active(self) -> bool:
        return not self.abandoned and self.accepted_version is None


@dataclass
class RunState:
    calls: dict[str, CallState] = field(default_factory=dict)
    artifacts: dict[str, ArtifactInfo] = field(default_factory=dict)
    lineages: dict[str, LineageState] = field(default_factory=dict)
    phase: str = "solve"  # solve | grade | select | evaluate | finished
    budget_exhausted: str = ""
    selected: tuple[str, int] | None = None
    selection_reason: str = ""
    outcome: str | None = None
    sessions: int = 0
    session_started_t: str = ""
    ended_wall_s: float = 0.0
    served_model: str | None = None
    first_served_model: str | None = None
    context_length: int | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_reasoning: int = 0
    tokens_by_role: dict[str, int] = field(default_factory=dict)
    records: int = 0
    last_t: str = ""
    interrupted: bool = False

    # ------------------------------------------------------------ derived views

    @property
    def tokens_total(self) -> int:
        return self.tokens_in + self.tokens_out

    def solve_calls(self) -> int:
        return sum(1 for c in self.calls.values() if c.phase == "solve")

    def in_flight(self) -> list[CallState]:
        return [c for c in self.calls.values() if c.status == "planned"]

    def accepted(self) -> list[LineageState]:
        return [ln for ln in self.lineages.values() if ln.accepted_version is not None]

    def proof_text_artifact(self, lineage: str, version: int) -> ArtifactInfo | None:
        ver = self.lineages[lineage].versions.get(version)
        if ver is None or ver.proof_artifact is None:
            return None
        return self.artifacts[ver.proof_artifact]

    # ------------------------------------------------------------ the fold

    def apply(self, record: LoopRecord, t: str) -> None:
        self.records += 1
        self.last_t = t
        if isinstance(record, SessionStarted):
            self.sessions = max(self.sessions, record.session)
            self.session_started_t = t
            self.interrupted = False
        elif isinstance(record, SessionEnded):
            self.ended_wall_s += record.wall_s
            self.interrupted = record.reason == "interrupted"
        elif isinstance(record, EndpointProbed):
            self.served_model = record.served_model
            if self.first_served_model is None:
                self.first_served_model = record.served_model
            self.context_length = record.context_length
        elif isinstance(record, CallPlanned):
            self._plan(record)
        elif isinstance(record, ContextBuilt):
            self.calls[record.call_id].has_context = True
        elif isinstance(record, LlmStarted):
            call = self.calls[record.call_id]
            call.attempts = max(call.attempts, record.attempt)
            call.open_attempt = record.attempt
            call.attempt_streams[record.attempt] = (
                record.api,
                bool(record.params.get("stream", True)),
            )
        elif isinstance(record, LlmCompleted | LlmFailed):
            call = self.calls[record.call_id]
            call.open_attempt = None
            self._count_usage(call, record.usage)
            if isinstance(record, LlmCompleted):
                call.response_blob = record.response.blob
                call.response_api, call.response_streamed = call.attempt_streams.get(
                    record.attempt, ("chat", True)
                )
        elif isinstance(record, LlmAbandoned):
            self.calls[record.call_id].open_attempt = None
        elif isinstance(record, CallCompleted):
            self._complete(record)
        elif isinstance(record, CallFailed):
            self.calls[record.call_id].status = "failed"
            self._version_unusable_if_producer(record.call_id)
        elif isinstance(record, CallCancelled):
            self.calls[record.call_id].status = "cancelled"
            self._version_unusable_if_producer(record.call_id)
        elif isinstance(record, ArtifactPut):
            self._artifact(record)
        elif isinstance(record, Decision):
            self._decide(record)
        elif isinstance(record, RunFinished):
            self.phase = "finished"
            self.outcome = record.outcome

    def _plan(self, rec: CallPlanned) -> None:
        self.calls[rec.call_id] = CallState(
            call_id=rec.call_id,
            role=rec.role,
            variant=rec.variant,
            phase=rec.phase,
            lineage=rec.lineage,
            version=rec.version,
            target=rec.target,
            evaluation=rec.evaluation,
        )
        if rec.lineage is not None and rec.lineage not in self.lineages:
            self.lineages[rec.lineage] = LineageState(lineage=rec.lineage, index=len(self.lineages))
        if rec.role in ("generator", "reviser") and rec.lineage and rec.version is not None:
            parent = int(rec.target) if rec.role == "reviser" and rec.target else None
            self.lineages[rec.lineage].versions[rec.version] = VersionState(
                lineage=rec.lineage, version=rec.version, producer=rec.call_id, parent=parent
            )

    def _count_usage(self, call: CallState, usage: dict[str, int]) -> None:
        spent_in = usage.get("input_tokens", 0)
        spent_out = usage.get("output_tokens", 0)
        self.tokens_in += spent_in
        self.tokens_out += spent_out
        self.tokens_reasoning += usage.get("reasoning_tokens", 0)
        call.tokens += spent_in + spent_out
        self.tokens_by_role[call.role] = (
            self.tokens_by_role.get(call.role, 0) + spent_in + spent_out
        )

    def _complete(self, rec: CallCompleted) -> None:
        call = self.calls[rec.call_id]
        call.status = "completed"
        call.truncated = rec.truncated
        call.parsed_ok = rec.parsed_ok
        call.finish_reason = rec.finish_reason
        call.facts = dict(rec.facts)
        call.output_blob = rec.output.blob
        if rec.truncated:
            self._version_unusable_if_producer(rec.call_id)

    def _version_unusable_if_producer(self, call_id: str) -> None:
        call = self.calls[call_id]
        if call.role in ("generator", "reviser") and call.lineage and call.version is not None:
            version = self.lineages[call.lineage].versions.get(call.version)
            if version is not None and version.proof_artifact is None:
                version.status = "unusable"

    def _artifact(self, rec: ArtifactPut) -> None:
        self.artifacts[rec.artifact] = ArtifactInfo(
            artifact=rec.artifact,
            kind=rec.kind,
            blob=rec.blob.blob,
            size=rec.blob.bytes,
            producer=rec.producer,
            lineage=rec.lineage,
            version=rec.version,
        )
        if rec.kind == "proof_text" and rec.lineage and rec.version is not None:
            if rec.lineage not in self.lineages:  # a proof given to a grading-only run
                self.lineages[rec.lineage] = LineageState(
                    lineage=rec.lineage, index=len(self.lineages)
                )
            versions = self.lineages[rec.lineage].versions
            if rec.version not in versions:
                versions[rec.version] = VersionState(
                    lineage=rec.lineage, version=rec.version, producer=rec.producer, parent=None
                )
            versions[rec.version].proof_artifact = rec.artifact

    def _decide(self, rec: Decision) -> None:
        lineage = self.lineages.get(rec.lineage) if rec.lineage else None
        if rec.kind == "accepted" and lineage is not None and rec.version is not None:
            lineage.accepted_version = rec.version
            lineage.versions[rec.version].status = "accepted"
            lineage.consecutive_failures = 0
        elif rec.kind == "round_failed" and lineage is not None and rec.version is not None:
            lineage.versions[rec.version].status = "failed"
            lineage.consecutive_failures += 1
            for key in _confirmed_keys(self, rec.lineage or "", rec.version):
                lineage.confirmed_keys.add(key)
        elif rec.kind == "abandoned" and lineage is not None:
            lineage.abandoned = True
            lineage.abandon_reason = rec.reason
        elif rec.kind == "phase" and rec.phase:
            self.phase = rec.phase
        elif rec.kind == "budget_exhausted":
            self.budget_exhausted = rec.reason
        elif rec.kind == "selected" and rec.lineage is not None and rec.version is not None:
            self.selected = (rec.lineage, rec.version)
            self.selection_reason = rec.reason


def verification_calls(state: RunState, lineage: str, version: int) -> list[CallState]:
    return [
        c
        for c in state.calls.values()
        if c.role == "verifier" and c.lineage == lineage and c.version == version
    ]


def review_calls(state: RunState, lineage: str, version: int) -> list[CallState]:
    return [
        c
        for c in state.calls.values()
        if c.role == "reviewer" and c.lineage == lineage and c.version == version
    ]


def confirmed_findings(state: RunState, lineage: str, version: int) -> list[dict[str, Any]]:
    """Findings of this version's verifications that their review confirmed, in a stable order."""
    found: list[dict[str, Any]] = []
    reviews = {c.target: c for c in review_calls(state, lineage, version)}
    for ver_call in sorted(verification_calls(state, lineage, version), key=lambda c: c.call_id):
        review = reviews.get(ver_call.call_id)
        if review is None or review.status != "completed":
            continue
        confirmed = set(review.facts.get("confirmed", []))
        severity = review.facts.get("severity", {})
        for finding in ver_call.facts.get("findings", []):
            if finding.get("id") in confirmed:
                found.append(
                    {
                        **finding,
                        "severity": severity.get(finding.get("id"), finding.get("severity")),
                        "verification": ver_call.call_id,
                    }
                )
    return found


def finding_key(finding: dict[str, Any]) -> str:
    """A finding's identity across versions: severity plus the start of its explanation,
    case- and punctuation-folded (the quoted location changes as a proof is revised)."""
    words = "".join(ch.lower() if ch.isalnum() else " " for ch in finding.get("explanation", ""))
    return f"{finding.get('severity', '')}:{' '.join(words.split())[:80]}"


def _confirmed_keys(state: RunState, lineage: str, version: int) -> list[str]:
    return [
        finding_key(f)
        for f in confirmed_findings(state, lineage, version)
        if f.get("severity") in ("critical", "major")
    ]
