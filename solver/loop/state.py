"""RunState = fold(journal records). Pure: no I/O, no clock, no blobs read.

Every field is derived from records alone, so a resumed run rebuilds exactly the state an
uninterrupted run had at the same record. ``apply`` takes every loop record type (the store's
own types never reach it). The one exception is ``reviews``, a setting of the run (its
manifest's ``acceptance.review``) that says how the records are read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from solver.records import (
    LOOP_RECORD_CLASSES,
    ArtifactPut,
    CallCancelled,
    CallCompleted,
    CallFailed,
    CallPlanned,
    ContextBuilt,
    Decision,
    EndpointProbed,
    Facts,
    LlmAbandoned,
    LlmCompleted,
    LlmFailed,
    LlmStarted,
    LoopRecord,
    NetConnect,
    NoFacts,
    Outcome,
    Phase,
    ProofFacts,
    ReviewFacts,
    RunFinished,
    SelectionFacts,
    SessionEnded,
    SessionStarted,
    ToolExecuted,
    Usage,
    VerificationFacts,
)
from solver.roles import ProofFinding, verifier

CallStatus = Literal["planned", "completed", "failed", "cancelled"]

# The calls that write a version of a lineage: a fresh proof, the generator's self-improvement
# turn, a revision (of the lineage's own version, or of another lineage's when a restart
# starts from the pool), and a recombination of proofs of several lineages.
PRODUCER_ROLES = ("generator", "generator:improve", "reviser", "reviser:recombine")
VersionStatus = Literal["open", "accepted", "failed", "unusable"]


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
    status: CallStatus = "planned"
    attempts: int = 0
    open_attempt: int | None = None  # an attempt started and not ended
    has_context: bool = False
    truncated: bool = False
    parsed_ok: bool = False
    finish_reason: str = ""
    facts: Facts = field(default_factory=NoFacts)
    output_blob: str | None = None
    tokens: int = 0
    output_tokens: int = 0  # what the call wrote: its role's lengths set the budget's caps
    # The raw response of an attempt that completed; a call killed after this is finished
    # from the recorded bytes on resume, never paid for twice.
    response_blob: str | None = None
    response_api: str = ""
    response_streamed: bool = True
    attempt_streams: dict[int, tuple[str, bool]] = field(default_factory=dict)
    # A call with tools is an exchange of turns: every response recorded (attempt -> blob),
    # in order, and the tool calls each asked for, as executed (attempt -> records)
    responses: dict[int, str] = field(default_factory=dict)
    tool_runs: dict[int, list[ToolExecuted]] = field(default_factory=dict)


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
    status: VersionStatus = "open"
    # The later checks an accepted version has passed: "final", "recheck" (issue 19 point 4).
    checks: set[str] = field(default_factory=set)


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


# A finding of one of these severities fails the proof it is found in.
BLOCKING_SEVERITIES = ("critical", "major")


@dataclass
class RunState:
    # The run reviews failing reports (``acceptance.review``); False: their findings stand
    # unreviewed. Set from the run's configuration before any record is applied.
    reviews: bool = True
    calls: dict[str, CallState] = field(default_factory=dict)
    artifacts: dict[str, ArtifactInfo] = field(default_factory=dict)
    lineages: dict[str, LineageState] = field(default_factory=dict)
    phase: Phase = "solve"
    budget_exhausted: str = ""
    selected: tuple[str, int] | None = None
    selection_reason: str = ""
    outcome: Outcome | None = None
    sessions: int = 0
    session_started_t: str = ""
    # (name, digest) of templates sessions added beyond the manifest's (a newer solver's)
    session_templates: set[tuple[str, str]] = field(default_factory=set)
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
    # Proof-writing calls failed since the last one completed: calls that fail cost no
    # budget, so only this count bounds a search whose every producer call is refused.
    producer_failures_in_a_row: int = 0
    # The call of the newest call.completed: its artifacts follow it at once, so it is the
    # only call a kill can have left without them (a resume records them)
    last_completed: str | None = None
    tool_calls: int = 0  # tool calls the models made (ran or refused), all calls together

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
        """Fold one record (the engine's as it writes it, or a journal line's on resume)."""
        self.records += 1
        self.last_t = t
        _HANDLERS[type(record)](self, record, t)

    def _session_started(self, r: SessionStarted, t: str) -> None:
        self.sessions = max(self.sessions, r.session)
        self.session_started_t = t
        self.session_templates.update(r.templates.items())
        self.interrupted = False
        self.session_open = True

    def _session_ended(self, r: SessionEnded, t: str) -> None:
        self.ended_wall_s += r.wall_s
        self.interrupted = r.reason == "interrupted"
        self.session_open = False
        self.session_end_reason = r.reason

    def _probed(self, r: EndpointProbed, t: str) -> None:
        self.served_model = r.served_model
        if self.first_served_model is None:
            self.first_served_model = r.served_model
        self.context_length = r.context_length

    def _plan(self, r: CallPlanned, t: str) -> None:
        lineage, version, role = r.lineage, r.version, r.role
        self.calls[r.call_id] = CallState(
            call_id=r.call_id,
            role=role,
            variant=r.variant,
            phase=r.phase,
            lineage=lineage,
            version=version,
            target=r.target,
            evaluation=r.evaluation,
        )
        if lineage is not None and lineage not in self.lineages:
            self.lineages[lineage] = LineageState(lineage=lineage, index=len(self.lineages))
        if role in PRODUCER_ROLES and lineage and version is not None:
            source = revision_source(r.target, lineage) if role != "reviser:recombine" else None
            # a version's parent is in its own lineage; a restart's first version has none
            parent = source[1] if source is not None and source[0] == lineage else None
            self.lineages[lineage].versions[version] = VersionState(
                lineage=lineage, version=version, producer=r.call_id, parent=parent
            )

    def _context(self, r: ContextBuilt, t: str) -> None:
        self.calls[r.call_id].has_context = True

    def _llm_started(self, r: LlmStarted, t: str) -> None:
        call = self.calls[r.call_id]
        call.attempts = max(call.attempts, r.attempt)
        call.open_attempt = r.attempt
        call.attempt_streams[r.attempt] = (r.api, bool(r.params.get("stream", True)))

    def _llm_ended(self, r: LlmCompleted | LlmFailed | LlmAbandoned, t: str) -> None:
        call = self.calls[r.call_id]
        call.open_attempt = None
        if r.usage is not None:
            self._count_usage(call, r.usage)

    def _llm_completed(self, r: LlmCompleted, t: str) -> None:
        self._llm_ended(r, t)
        call = self.calls[r.call_id]
        call.response_blob = r.response.blob
        call.responses[r.attempt] = r.response.blob
        call.response_api, call.response_streamed = call.attempt_streams.get(
            r.attempt, ("chat", True)
        )

    def _tool_executed(self, r: ToolExecuted, t: str) -> None:
        self.calls[r.call_id].tool_runs.setdefault(r.attempt, []).append(r)
        self.tool_calls += 1

    def _call_completed(self, r: CallCompleted, t: str) -> None:
        call = self.calls[r.call_id]
        call.status = "completed"
        self.last_completed = r.call_id
        call.truncated = r.truncated
        call.parsed_ok = r.parsed_ok
        call.finish_reason = r.finish_reason
        call.facts = r.facts
        call.output_blob = r.output.blob
        if call.role in PRODUCER_ROLES:
            self.producer_failures_in_a_row = 0
        if call.truncated:
            self._version_unusable_if_producer(call.call_id)

    def _call_failed(self, r: CallFailed, t: str) -> None:
        call = self.calls[r.call_id]
        call.status = "failed"
        if call.role in PRODUCER_ROLES:
            self.producer_failures_in_a_row += 1
        self._version_unusable_if_producer(r.call_id)

    def _call_cancelled(self, r: CallCancelled, t: str) -> None:
        self.calls[r.call_id].status = "cancelled"
        self._version_unusable_if_producer(r.call_id)

    def _run_finished(self, r: RunFinished, t: str) -> None:
        self.phase = "finished"
        self.outcome = r.outcome

    def _count_usage(self, call: CallState, usage: Usage) -> None:
        spent_in = usage.input_tokens
        spent_out = usage.output_tokens
        self.tokens_in += spent_in
        self.tokens_out += spent_out
        self.tokens_reasoning += usage.reasoning_tokens
        call.tokens += spent_in + spent_out
        call.output_tokens += spent_out
        self.tokens_by_role[call.role] = (
            self.tokens_by_role.get(call.role, 0) + spent_in + spent_out
        )

    def _version_unusable_if_producer(self, call_id: str) -> None:
        call = self.calls[call_id]
        if call.role in PRODUCER_ROLES and call.lineage and call.version is not None:
            version = self.lineages[call.lineage].versions.get(call.version)
            if version is not None and version.proof_artifact is None:
                version.status = "unusable"

    def _artifact(self, r: ArtifactPut, t: str) -> None:
        lineage, version, kind = r.lineage, r.version, r.kind
        self.artifacts[r.artifact] = ArtifactInfo(
            artifact=r.artifact,
            kind=kind,
            blob=r.blob.blob,
            size=r.blob.bytes,
            producer=r.producer,
            lineage=lineage,
            version=version,
        )
        if kind == "proof_text" and lineage and version is not None:
            if lineage not in self.lineages:  # a proof given to a grading-only run
                self.lineages[lineage] = LineageState(lineage=lineage, index=len(self.lineages))
            versions = self.lineages[lineage].versions
            if version not in versions:
                versions[version] = VersionState(
                    lineage=lineage, version=version, producer=r.producer, parent=None
                )
            versions[version].proof_artifact = r.artifact

    def _decide(self, r: Decision, t: str) -> None:
        kind, name, number = r.kind, r.lineage, r.version
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
        elif kind in ("final_passed", "recheck_passed") and lineage is not None:
            if number is not None:
                lineage.versions[number].checks.add(kind.removesuffix("_passed"))
        elif kind == "unaccepted" and lineage is not None and number is not None:
            # It failed a later check: a failed round of that version, and the lineage goes on.
            lineage.accepted_version = None
            lineage.versions[number].status = "failed"
            lineage.consecutive_failures += 1
            for key in _confirmed_keys(self, name or "", number):
                lineage.confirmed_keys.add(key)
        elif kind == "abandoned" and lineage is not None:
            lineage.abandoned = True
            lineage.abandon_reason = r.reason
        elif kind == "phase" and r.phase:
            self.phase = r.phase
        elif kind == "budget_exhausted":
            self.budget_exhausted = r.reason
        elif kind == "selected" and name is not None and number is not None:
            self.selected = (name, number)
            self.selection_reason = r.reason


_Handler = Callable[[RunState, Any, str], None]
_HANDLERS: dict[type[LoopRecord], _Handler] = {
    SessionStarted: RunState._session_started,
    SessionEnded: RunState._session_ended,
    EndpointProbed: RunState._probed,
    CallPlanned: RunState._plan,
    ContextBuilt: RunState._context,
    LlmStarted: RunState._llm_started,
    LlmCompleted: RunState._llm_completed,
    LlmFailed: RunState._llm_ended,
    LlmAbandoned: RunState._llm_ended,  # an attempt cut mid-stream still spent tokens
    ToolExecuted: RunState._tool_executed,
    CallCompleted: RunState._call_completed,
    CallFailed: RunState._call_failed,
    CallCancelled: RunState._call_cancelled,
    ArtifactPut: RunState._artifact,
    Decision: RunState._decide,
    RunFinished: RunState._run_finished,
    NetConnect: lambda state, r, t: None,
}


def revision_source(target: str | None, lineage: str) -> tuple[str, int] | None:
    """The version a revision (or self-improvement turn) starts from: its target is that
    version's number in the call's own lineage (``"3"``), or ``"L2.v3"`` for another
    lineage's (a restart from the pool's best proof). None for a call without one."""
    if not target:
        return None
    other, dot_v, number = target.rpartition(".v")
    if dot_v:
        return other, int(number)
    return lineage, int(target)


def pool_sources(target: str | None) -> list[tuple[str, int]]:
    """The versions a recombination was declared to see (``"L0.v3,L2.v1"``), in order."""
    found: list[tuple[str, int]] = []
    for item in (target or "").split(","):
        source = revision_source(item.strip(), "") if item.strip() else None
        if source is not None and source[0]:
            found.append(source)
    return found


# A version's verifications: its rounds', and the later checks run by another family.
VERIFIER_KEYS = frozenset({verifier.NAME, verifier.CHECK})


def verification_calls(state: RunState, lineage: str, version: int) -> list[CallState]:
    return [
        c
        for c in state.calls.values()
        if c.role in VERIFIER_KEYS and c.lineage == lineage and c.version == version
    ]


def review_calls(state: RunState, lineage: str, version: int) -> list[CallState]:
    return [
        c
        for c in state.calls.values()
        if c.role == "reviewer" and c.lineage == lineage and c.version == version
    ]


def findings_of(call: CallState) -> tuple[ProofFinding, ...]:
    """A verification's findings; none for any other call."""
    return call.facts.findings if isinstance(call.facts, VerificationFacts) else ()


def review_verdicts(
    review: CallState | None, findings: Sequence[ProofFinding]
) -> tuple[set[str], dict[str, str]] | None:
    """The ids a verification's review confirmed and the severities it set; None while there
    is no ended review. A review that failed or was cancelled reviewed nothing, so every
    finding stands at its own severity (as when a reviewer's output does not parse)."""
    if review is None or review.status == "planned":
        return None
    if review.status != "completed":
        return {f.id for f in findings}, {}
    if not isinstance(review.facts, ReviewFacts):
        return set(), {}
    return set(review.facts.confirmed), dict(review.facts.severity)


def reviews_of(resolved: Any) -> bool:
    """Whether a run reviews failing reports, from its manifest's resolved settings
    (``config.resolved``): only an explicit ``acceptance.review`` of false turns reviews off,
    so a run written before the setting existed reads as it was run."""
    acceptance = resolved.get("acceptance") if isinstance(resolved, dict) else None
    return not (isinstance(acceptance, dict) and acceptance.get("review") is False)


def failing_report(call: CallState) -> bool:
    """A verification report that fails its proof as written: a verdict other than a pass,
    or a critical or major finding beside a pass."""
    verdict = call.facts.verdict if isinstance(call.facts, VerificationFacts) else None
    return verdict != "pass" or any(f.severity in BLOCKING_SEVERITIES for f in findings_of(call))


def unreviewed_verdicts(
    call: CallState, findings: Sequence[ProofFinding]
) -> tuple[set[str], dict[str, str]] | None:
    """In a run without reviews: every finding of a failing report stands as reported (the
    reports a run with reviews would review); None for a passing report or an unended call."""
    if call.status != "completed" or not findings or not failing_report(call):
        return None
    return {f.id for f in findings}, {}


def confirmed_findings(state: RunState, lineage: str, version: int) -> list[ProofFinding]:
    """Findings of this version's verifications that their review confirmed (or could not
    review), at the severity the review set, in a stable order; in a run without reviews,
    the findings of its failing reports as reported."""
    found: list[ProofFinding] = []
    reviews = {c.target: c for c in review_calls(state, lineage, version)}
    for ver_call in sorted(verification_calls(state, lineage, version), key=lambda c: c.call_id):
        findings = findings_of(ver_call)
        if state.reviews:
            verdicts = review_verdicts(reviews.get(ver_call.call_id), findings)
        else:
            verdicts = unreviewed_verdicts(ver_call, findings)
        if verdicts is None:
            continue
        confirmed, severity = verdicts
        for finding in findings:
            if finding.id in confirmed:
                found.append(
                    finding.model_copy(
                        update={"severity": severity.get(finding.id, finding.severity)}
                    )
                )
    return found


def finding_keys(finding: ProofFinding) -> set[str]:
    """A recorded finding's identities across versions (see ``verifier.finding_keys``)."""
    return verifier.finding_keys(finding.location, finding.explanation)


def _confirmed_keys(state: RunState, lineage: str, version: int) -> set[str]:
    keys: set[str] = set()
    for finding in confirmed_findings(state, lineage, version):
        if finding.severity in ("critical", "major"):
            keys |= finding_keys(finding)
    return keys


assert set(_HANDLERS) == set(LOOP_RECORD_CLASSES.values())


# ---------------------------------------------------------------- queries the policy asks


def verdict_of(call: CallState) -> str | None:
    return call.facts.verdict if isinstance(call.facts, VerificationFacts) else None


def call_ordinal(call: CallState) -> int:
    return int(call.call_id.rsplit(".", 1)[-1])


def check_kind(call: CallState) -> str:
    """What a verification is for, from its id ``L0.v3.<kind>.<i>``: ``verify`` (a round),
    or the later check ``final`` or ``recheck``."""
    return call.call_id.rsplit(".", 2)[-2]


def check_calls(state: RunState, lineage: str, version: int, stage: str) -> list[CallState]:
    """The verifications of one later check (``L0.v3.final.0``, ...), in their order."""
    found = [c for c in verification_calls(state, lineage, version) if check_kind(c) == stage]
    return sorted(found, key=call_ordinal)


def review_running(state: RunState, verification: CallState) -> bool:
    review = state.calls.get(f"{verification.call_id}.review")
    return review is not None and review.status == "planned"


def seeded_sources(state: RunState) -> set[frozenset[tuple[str, int]]]:
    """The sources restarts have already started from: a pool restart's one version, a
    recombination's set (each is used once, so restarts do not repeat one another)."""
    found: set[frozenset[tuple[str, int]]] = set()
    for call in state.calls.values():
        if call.role == "reviser" and call.lineage and call.target and ".v" in call.target:
            source = revision_source(call.target, call.lineage)
            if source is not None:
                found.add(frozenset({source}))
        elif call.role == "reviser:recombine":
            found.add(frozenset(pool_sources(call.target)))
    return found


def accepted_of(lineage: LineageState) -> int:
    """The accepted version of a lineage known to be accepted."""
    assert lineage.accepted_version is not None
    return lineage.accepted_version


def answer_of(state: RunState, version: VersionState) -> str | None:
    """The comparison key of the final answer a version's proof states, if it states one."""
    producer = state.calls.get(version.producer)
    facts = producer.facts if producer is not None else None
    answer = facts.final_answer if isinstance(facts, ProofFacts) else None
    if not answer:
        return None
    from solver.answers import answer_key  # sympy loads only when answers are compared

    return answer_key(answer) or None


def answer_groups(
    state: RunState, lineages: list[LineageState]
) -> dict[str | None, list[LineageState]]:
    """Accepted lineages by the final answer of their accepted version (None: it states
    none), each group in index order."""
    groups: dict[str | None, list[LineageState]] = {}
    for lineage in sorted(lineages, key=lambda ln: ln.index):
        key = answer_of(state, lineage.versions[accepted_of(lineage)])
        groups.setdefault(key, []).append(lineage)
    return groups


def disputed_versions(state: RunState) -> set[tuple[str, int]]:
    """The accepted versions with a final answer, when they do not all state the same one."""
    stated = {k: v for k, v in answer_groups(state, state.accepted()).items() if k is not None}
    if len(stated) < 2:
        return set()
    return {(ln.lineage, accepted_of(ln)) for group in stated.values() for ln in group}


def graded_versions(state: RunState) -> list[VersionState]:
    found: list[VersionState] = []
    for call in state.calls.values():
        if call.phase == "grade" and call.lineage is not None and call.version is not None:
            version = state.lineages[call.lineage].versions.get(call.version)
            if version is not None and version not in found:
                found.append(version)
    order = {ln.lineage: ln.index for ln in state.lineages.values()}
    return sorted(found, key=lambda v: order[v.lineage])


def grade_call_id(version: VersionState, n: int = 0) -> str:
    """``grade.L0.v3`` for the first grade of a version, ``grade.L0.v3.1`` ... for more."""
    base = f"grade.{version.lineage}.v{version.version}"
    return base if n == 0 else f"{base}.{n}"


def lineage_index(state: RunState, version: VersionState) -> int:
    return state.lineages[version.lineage].index


def pair_target(first: VersionState, second: VersionState) -> str:
    return f"{first.lineage}.v{first.version},{second.lineage}.v{second.version}"


def pair_of(target: str) -> list[tuple[str, int]]:
    """The proofs a pairwise selector call shows, in order (ValueError if malformed)."""
    shown = []
    for part in target.split(","):
        lineage, sep, version = part.rpartition(".v")
        if not sep or not lineage or not version.isdigit():
            raise ValueError(f"not a pair of proofs: {target!r}")
        shown.append((lineage, int(version)))
    return shown


def picked(state: RunState, call_id: str) -> tuple[str, int] | None:
    call = state.calls[call_id]
    facts = call.facts
    if call.status == "completed" and call.parsed_ok and isinstance(facts, SelectionFacts):
        return facts.choice
    return None


# The lineage of a grading-only run's given proof (solver.run.start.record_inputs).
GIVEN = "given"
_RIVAL = "rival"


def rival_lineage(number: int) -> str:
    """The lineage of the ``number``-th proof a given proof is compared with."""
    return f"{_RIVAL}{number}"


def given_comparisons(state: RunState) -> list[tuple[str, str, str]]:
    """The pairwise selector calls comparing a given proof with each of its rivals, both ways:
    (call id, target, rival lineage), the given proof shown first in the ``ab`` call."""
    if GIVEN not in state.lineages:
        return []
    numbered = {
        int(name[len(_RIVAL) :]): name
        for name in state.lineages
        if name.startswith(_RIVAL) and name[len(_RIVAL) :].isdigit()
    }
    rivals = [numbered[number] for number in sorted(numbered)]
    given = f"{GIVEN}.v0"
    return [
        call
        for name in rivals
        for call in (
            (f"given.{name}.ab", f"{given},{name}.v0", name),
            (f"given.{name}.ba", f"{name}.v0,{given}", name),
        )
    ]
