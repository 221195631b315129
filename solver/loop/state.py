"""RunState = fold(journal records). Pure: no I/O, no clock, no blobs read.

Every field is derived from records alone, so a resumed run rebuilds exactly the state an
uninterrupted run had at the same record. ``apply`` must accept every record type the journal
may hold (the store's own types are ignored).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from solver.records import LOOP_RECORD_TYPES, LoopRecord
from solver.roles import verifier


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
    session_open: bool = False  # a session started and has not recorded its end
    session_end_reason: str = ""  # why the last session that recorded its end ended

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
        """Fold one typed record (as the engine writes it)."""
        self.apply_raw(record.type, record.data(), t)

    def apply_raw(self, type_: str, d: dict[str, Any], t: str) -> None:
        """Fold one record given as its journal type and data. Resume folds raw data: the
        chain was verified, and skipping model validation keeps 100k records in budget."""
        handler = _HANDLERS.get(type_)
        if handler is None:
            return  # the store's own records
        self.records += 1
        self.last_t = t
        handler(self, d, t)

    def _session_started(self, d: dict[str, Any], t: str) -> None:
        self.sessions = max(self.sessions, d["session"])
        self.session_started_t = t
        self.interrupted = False
        self.session_open = True

    def _session_ended(self, d: dict[str, Any], t: str) -> None:
        self.ended_wall_s += d["wall_s"]
        self.interrupted = d["reason"] == "interrupted"
        self.session_open = False
        self.session_end_reason = d["reason"]

    def _probed(self, d: dict[str, Any], t: str) -> None:
        self.served_model = d["served_model"]
        if self.first_served_model is None:
            self.first_served_model = d["served_model"]
        self.context_length = d.get("context_length")

    def _plan(self, d: dict[str, Any], t: str) -> None:
        lineage, version, role = d.get("lineage"), d.get("version"), d["role"]
        self.calls[d["call_id"]] = CallState(
            call_id=d["call_id"],
            role=role,
            variant=d["variant"],
            phase=d["phase"],
            lineage=lineage,
            version=version,
            target=d.get("target"),
            evaluation=d.get("evaluation", False),
        )
        if lineage is not None and lineage not in self.lineages:
            self.lineages[lineage] = LineageState(lineage=lineage, index=len(self.lineages))
        if role in ("generator", "reviser") and lineage and version is not None:
            target = d.get("target")
            parent = int(target) if role == "reviser" and target else None
            self.lineages[lineage].versions[version] = VersionState(
                lineage=lineage, version=version, producer=d["call_id"], parent=parent
            )

    def _context(self, d: dict[str, Any], t: str) -> None:
        self.calls[d["call_id"]].has_context = True

    def _llm_started(self, d: dict[str, Any], t: str) -> None:
        call = self.calls[d["call_id"]]
        call.attempts = max(call.attempts, d["attempt"])
        call.open_attempt = d["attempt"]
        call.attempt_streams[d["attempt"]] = (d["api"], bool(d["params"].get("stream", True)))

    def _llm_ended(self, d: dict[str, Any], t: str) -> None:
        call = self.calls[d["call_id"]]
        call.open_attempt = None
        self._count_usage(call, d.get("usage") or {})

    def _llm_completed(self, d: dict[str, Any], t: str) -> None:
        self._llm_ended(d, t)
        call = self.calls[d["call_id"]]
        call.response_blob = d["response"]["blob"]
        call.response_api, call.response_streamed = call.attempt_streams.get(
            d["attempt"], ("chat", True)
        )

    def _llm_abandoned(self, d: dict[str, Any], t: str) -> None:
        self._llm_ended(d, t)  # an attempt cut mid-stream still spent tokens

    def _call_completed(self, d: dict[str, Any], t: str) -> None:
        call = self.calls[d["call_id"]]
        call.status = "completed"
        call.truncated = d["truncated"]
        call.parsed_ok = d["parsed_ok"]
        call.finish_reason = d["finish_reason"]
        call.facts = dict(d.get("facts", {}))
        call.output_blob = d["output"]["blob"]
        if call.truncated:
            self._version_unusable_if_producer(call.call_id)

    def _call_failed(self, d: dict[str, Any], t: str) -> None:
        self.calls[d["call_id"]].status = "failed"
        self._version_unusable_if_producer(d["call_id"])

    def _call_cancelled(self, d: dict[str, Any], t: str) -> None:
        self.calls[d["call_id"]].status = "cancelled"
        self._version_unusable_if_producer(d["call_id"])

    def _run_finished(self, d: dict[str, Any], t: str) -> None:
        self.phase = "finished"
        self.outcome = d["outcome"]

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

    def _version_unusable_if_producer(self, call_id: str) -> None:
        call = self.calls[call_id]
        if call.role in ("generator", "reviser") and call.lineage and call.version is not None:
            version = self.lineages[call.lineage].versions.get(call.version)
            if version is not None and version.proof_artifact is None:
                version.status = "unusable"

    def _artifact(self, d: dict[str, Any], t: str) -> None:
        lineage, version, kind = d.get("lineage"), d.get("version"), d["kind"]
        self.artifacts[d["artifact"]] = ArtifactInfo(
            artifact=d["artifact"],
            kind=kind,
            blob=d["blob"]["blob"],
            size=d["blob"]["bytes"],
            producer=d["producer"],
            lineage=lineage,
            version=version,
        )
        if kind == "proof_text" and lineage and version is not None:
            if lineage not in self.lineages:  # a proof given to a grading-only run
                self.lineages[lineage] = LineageState(lineage=lineage, index=len(self.lineages))
            versions = self.lineages[lineage].versions
            if version not in versions:
                versions[version] = VersionState(
                    lineage=lineage, version=version, producer=d["producer"], parent=None
                )
            versions[version].proof_artifact = d["artifact"]

    def _decide(self, d: dict[str, Any], t: str) -> None:
        kind, name, number = d["kind"], d.get("lineage"), d.get("version")
        lineage = self.lineages.get(name) if name else None
        if kind == "accepted" and lineage is not None and number is not None:
            lineage.accepted_version = number
            lineage.versions[number].status = "accepted"
            lineage.consecutive_failures = 0
        elif kind == "round_failed" and lineage is not None and number is not None:
            lineage.versions[number].status = "failed"
            lineage.consecutive_failures += 1
            for key in _confirmed_keys(self, name or "", number):
                lineage.confirmed_keys.add(key)
        elif kind == "abandoned" and lineage is not None:
            lineage.abandoned = True
            lineage.abandon_reason = d["reason"]
        elif kind == "phase" and d.get("phase"):
            self.phase = d["phase"]
        elif kind == "budget_exhausted":
            self.budget_exhausted = d["reason"]
        elif kind == "selected" and name is not None and number is not None:
            self.selected = (name, number)
            self.selection_reason = d["reason"]


_Handler = Callable[[RunState, dict[str, Any], str], None]
_HANDLERS: dict[str, _Handler] = {
    "session.started": RunState._session_started,
    "session.ended": RunState._session_ended,
    "endpoint.probed": RunState._probed,
    "call.planned": RunState._plan,
    "context.built": RunState._context,
    "llm.started": RunState._llm_started,
    "llm.completed": RunState._llm_completed,
    "llm.failed": RunState._llm_ended,
    "llm.abandoned": RunState._llm_abandoned,
    "call.completed": RunState._call_completed,
    "call.failed": RunState._call_failed,
    "call.cancelled": RunState._call_cancelled,
    "artifact.put": RunState._artifact,
    "decision": RunState._decide,
    "run.finished": RunState._run_finished,
    "net.connect": lambda state, d, t: None,
}
assert set(_HANDLERS) == set(LOOP_RECORD_TYPES)


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


def review_verdicts(
    review: CallState | None, findings: list[dict[str, Any]]
) -> tuple[set[str], dict[str, str]] | None:
    """The ids a verification's review confirmed and the severities it set; None while there
    is no ended review. A review that failed or was cancelled reviewed nothing, so every
    finding stands at its own severity (as when a reviewer's output does not parse)."""
    if review is None or review.status == "planned":
        return None
    if review.status != "completed":
        return {str(f.get("id")) for f in findings}, {}
    return set(review.facts.get("confirmed", [])), dict(review.facts.get("severity", {}))


def confirmed_findings(state: RunState, lineage: str, version: int) -> list[dict[str, Any]]:
    """Findings of this version's verifications that their review confirmed (or could not
    review), in a stable order."""
    found: list[dict[str, Any]] = []
    reviews = {c.target: c for c in review_calls(state, lineage, version)}
    for ver_call in sorted(verification_calls(state, lineage, version), key=lambda c: c.call_id):
        verdicts = review_verdicts(
            reviews.get(ver_call.call_id), ver_call.facts.get("findings", [])
        )
        if verdicts is None:
            continue
        confirmed, severity = verdicts
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


def finding_keys(finding: dict[str, Any]) -> set[str]:
    """A recorded finding's identities across versions (see ``verifier.finding_keys``)."""
    return verifier.finding_keys(finding.get("location"), finding.get("explanation"))


def _confirmed_keys(state: RunState, lineage: str, version: int) -> set[str]:
    keys: set[str] = set()
    for finding in confirmed_findings(state, lineage, version):
        if finding.get("severity") in ("critical", "major"):
            keys |= finding_keys(finding)
    return keys
