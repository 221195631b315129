"""The typed records of a run: the loop's journal record types, the manifest, usage and the
facts each role's output leaves for the policy.

Each type is a frozen pydantic model with a ``type`` discriminator. On disk, the journal
envelope (``seq``, ``t``, ``type``, ``v``, ``sess``, ``prev``) is the store's; the ``data`` of a
line is the model's fields without ``type``. Versions bump per type; :data:`SCHEMA_CHANGES`
says what each version changed. Readers accept every version listed and refuse newer ones.

Blob references inside data are ``{"blob": "sha256:<hex>", "bytes": N}`` objects, so the store
can check that every blob a record names is already durable.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    field_serializer,
    model_serializer,
)

from solver.problems import Problem

# The facts are the roles' (each role's parser makes its own); re-exported as records.
from solver.roles import (
    FACTS_ADAPTER as FACTS_ADAPTER,
)
from solver.roles import (
    Facts as Facts,
)
from solver.roles import (
    GradeFacts as GradeFacts,
)
from solver.roles import (
    NoFacts as NoFacts,
)
from solver.roles import (
    NotUsedFacts as NotUsedFacts,
)
from solver.roles import (
    ProofFacts as ProofFacts,
)
from solver.roles import (
    ReviewFacts as ReviewFacts,
)
from solver.roles import (
    SelectionFacts as SelectionFacts,
)
from solver.roles import (
    VerificationFacts as VerificationFacts,
)
from solver.wire import Api

RECORD_VERSION = 1
SCHEMA_CHANGES: dict[int, str] = {1: "initial loop record set"}


class BlobLink(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    blob: str
    bytes: int


class Usage(BaseModel):
    """Tokens one attempt spent, as the journal records them. The keys an attempt recorded
    are the keys written back: a failed attempt has none, one cut short only the estimated
    input and output (see :class:`LlmAbandoned`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens

    @model_serializer(mode="wrap")
    def _given_keys_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        return {key: value for key, value in dumped.items() if key in self.model_fields_set}


class _Rec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # Fields a record type gained after it was first written: left off the line while they
    # hold their default, so records that have nothing to say in them keep their old shape.
    added_later: ClassVar[tuple[str, ...]] = ()

    def data(self) -> dict[str, Any]:
        out = self.model_dump(mode="json", exclude={"type"})
        for name in self.added_later:
            default = type(self).model_fields[name].get_default(call_default_factory=True)
            if getattr(self, name) == default:
                del out[name]
        return out

    def record_type(self) -> str:
        return str(type(self).model_fields["type"].default)


class SessionStarted(_Rec):
    type: Literal["session.started"] = "session.started"
    session: int
    reason: Literal["fresh", "resume"]
    pid: int
    host: str
    code: dict[str, Any]
    argv: list[str]
    allow_model_change: bool = False
    # set when this session was moved to another endpoint (`solver resume --endpoint`),
    # masked; the audit's network check holds the session to it
    endpoint: str | None = None
    # the prompt templates this session renders with that the manifest does not name (name
    # -> digest, their bytes stored as blobs first): a resume by a newer solver whose
    # templates changed since the run was made; the audit accepts them from this session on
    templates: dict[str, str] = Field(default_factory=dict)
    added_later = ("endpoint", "templates")


SessionEndReason = Literal[
    "finished", "interrupted", "endpoint_unavailable", "error", "storage_full", "crashed"
]


class SessionEnded(_Rec):
    type: Literal["session.ended"] = "session.ended"
    session: int
    reason: SessionEndReason
    detail: str = ""
    wall_s: float


class EndpointProbed(_Rec):
    type: Literal["endpoint.probed"] = "endpoint.probed"
    url: str
    models: list[str]
    served_model: str
    context_length: int | None
    response: BlobLink | None
    model_changed_from: str | None = None
    # what this endpoint makes of the run's settings, said once: a thinking budget it does not
    # take, a max_tokens above its context (docs/format.md, Request fields)
    notes: list[str] = Field(default_factory=list)
    added_later = ("notes",)


class NetConnect(_Rec):
    type: Literal["net.connect"] = "net.connect"
    call_id: str
    host: str
    port: int
    address: str


class CallPlanned(_Rec):
    """A decision of the policy: this call will be made. ``step_id`` equals ``call_id``; both
    are deterministic (lineage, version, role, ordinal) so they are stable across sessions."""

    type: Literal["call.planned"] = "call.planned"
    call_id: str
    role: str
    variant: str
    phase: Literal["solve", "grade", "select", "evaluate"]
    lineage: str | None = None
    version: int | None = None
    target: str | None = None  # e.g. the verification a review is of
    evaluation: bool = False


Phase = Literal["solve", "grade", "select", "evaluate", "finished"]
Outcome = Literal["solved", "partial", "unsolved", "failed"]


class InputLink(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: str
    artifact: str  # artifact id (from artifact.put)
    blob: str  # digest of the exact text given to the template


class ContextBuilt(_Rec):
    """Everything a call's prompt is made of: the role's declared inputs (each linked to the
    artifact it came from) and the template variant. The messages are reproducible from these."""

    type: Literal["context.built"] = "context.built"
    call_id: str
    role: str
    variant: str
    templates: dict[str, str]  # template name -> sha256 of its bytes
    inputs: BlobLink  # canonical JSON of the role's Inputs model
    links: dict[str, list[InputLink]]
    messages: BlobLink  # JSON [[role, content], ...]


class LlmStarted(_Rec):
    type: Literal["llm.started"] = "llm.started"
    call_id: str
    attempt: int
    request_id: str
    url: str
    api: str
    params: dict[str, Any]
    request: BlobLink
    max_tokens_cap: int | None


class LlmCompleted(_Rec):
    type: Literal["llm.completed"] = "llm.completed"
    call_id: str
    attempt: int
    response: BlobLink
    status: int | None
    finish_reason: str | None
    usage: Usage
    telemetry: dict[str, Any]


class LlmFailed(_Rec):
    type: Literal["llm.failed"] = "llm.failed"
    call_id: str
    attempt: int
    response: BlobLink | None
    error_kind: str
    message: str
    retryable: bool
    usage: Usage = Field(default_factory=Usage)
    telemetry: dict[str, Any] = Field(default_factory=dict)


class LlmAbandoned(_Rec):
    type: Literal["llm.abandoned"] = "llm.abandoned"
    call_id: str
    attempt: int
    reason: str
    # An estimate of what an attempt cut mid-stream spent (its prompt, and the output that
    # streamed before the cut), so the token budget counts it; None when nothing streamed.
    usage: Usage | None = None


class ToolExecuted(_Rec):
    """One tool call a model made inside its call (docs/format.md, Tool executions): the code
    it asked to run, what the sandbox gave, and the exact text the model got back. Refused
    calls (an unknown tool, bad arguments, the call's limit reached) ran nothing: their
    ``code``, ``result``, ``limits`` and ``sandbox`` are null."""

    type: Literal["tool.executed"] = "tool.executed"
    call_id: str
    attempt: int  # the attempt whose response asked for it
    index: int  # its place among that response's tool calls
    tool_call_id: str
    tool: str  # the name the model asked for
    status: Literal["ran", "refused"]
    code: BlobLink | None  # the program, UTF-8, as run
    result: BlobLink | None  # canonical JSON of the sandbox's record (solver tool run --json)
    content: BlobLink  # the tool result the model was given
    is_error: bool
    exit: int | None = None
    timed_out: bool = False
    killed_reason: str | None = None
    limits: dict[str, Any] | None = None
    sandbox: dict[str, str] | None = None


class CallCompleted(_Rec):
    type: Literal["call.completed"] = "call.completed"
    call_id: str
    role: str
    finish_reason: str
    truncated: bool
    parsed_ok: bool
    output: BlobLink  # canonical JSON of the role's parsed Output (conservative when not parsed)
    text: BlobLink
    reasoning: BlobLink | None
    usage: Usage
    # What the policy needs of the output (verdict, findings, decisions, score, choice), so that
    # folding the journal never reads blobs.
    facts: Facts = Field(default_factory=NoFacts)


class CallFailed(_Rec):
    type: Literal["call.failed"] = "call.failed"
    call_id: str
    role: str
    error_kind: str
    message: str


class CallCancelled(_Rec):
    type: Literal["call.cancelled"] = "call.cancelled"
    call_id: str
    reason: str


class ArtifactPut(_Rec):
    type: Literal["artifact.put"] = "artifact.put"
    artifact: str
    kind: str
    blob: BlobLink
    producer: str  # call id
    lineage: str | None = None
    version: int | None = None


class Decision(_Rec):
    type: Literal["decision"] = "decision"
    kind: Literal[
        "accepted",
        "round_failed",
        "abandoned",
        "phase",
        "budget_exhausted",
        "selected",
        # an accepted proof's later checks (issue 19 point 4): passed, or failed (no longer
        # accepted; its lineage goes on)
        "final_passed",
        "recheck_passed",
        "unaccepted",
    ]
    lineage: str | None = None
    version: int | None = None
    phase: Phase | None = None
    reason: str


class RunFinished(_Rec):
    type: Literal["run.finished"] = "run.finished"
    outcome: Outcome
    final: dict[str, BlobLink]
    summary: dict[str, Any]


LoopRecord = Annotated[
    SessionStarted
    | SessionEnded
    | EndpointProbed
    | NetConnect
    | CallPlanned
    | ContextBuilt
    | LlmStarted
    | LlmCompleted
    | LlmFailed
    | LlmAbandoned
    | ToolExecuted
    | CallCompleted
    | CallFailed
    | CallCancelled
    | ArtifactPut
    | Decision
    | RunFinished,
    Field(discriminator="type"),
]
LOOP_RECORD_ADAPTER: TypeAdapter[LoopRecord] = TypeAdapter(LoopRecord)
LOOP_RECORD_CLASSES: dict[str, type[_Rec]] = {
    str(m.model_fields["type"].default): m
    for m in (
        SessionStarted,
        SessionEnded,
        EndpointProbed,
        NetConnect,
        CallPlanned,
        ContextBuilt,
        LlmStarted,
        LlmCompleted,
        LlmFailed,
        LlmAbandoned,
        ToolExecuted,
        CallCompleted,
        CallFailed,
        CallCancelled,
        ArtifactPut,
        Decision,
        RunFinished,
    )
}
LOOP_RECORD_TYPES: frozenset[str] = frozenset(LOOP_RECORD_CLASSES)


def parse_loop_record(type_: str, v: int, data: dict[str, Any]) -> LoopRecord | None:
    """The typed record for a journal line, or None for types that are not the loop's."""
    model = LOOP_RECORD_CLASSES.get(type_)
    if model is None:
        return None
    if v > RECORD_VERSION:
        raise ValueError(f"record type {type_} has version {v}, newer than this solver reads")
    # By its type's own model (the line's type names it): no trying of the union's members.
    record: LoopRecord = model.model_validate(data)  # type: ignore[assignment]
    return record


def loop_records_schema() -> dict[str, Any]:
    return LOOP_RECORD_ADAPTER.json_schema()


# ---------------------------------------------------------------- the manifest

# The format new runs are written in (docs/format.md); runs of format 1 still read.
MANIFEST_FORMAT: Literal["solver-run/2"] = "solver-run/2"


class _ManifestPart(BaseModel):
    # Unknown keys are kept, not refused: a manifest is written once and read by every later
    # solver, and a key a newer solver added must not make an older run unreadable.
    model_config = ConfigDict(extra="allow", frozen=True)


class ManifestProblem(_ManifestPart):
    path: str | None
    digest: str
    original_digest: str | None = None
    original: BlobLink | None = None  # the problem file's bytes as read, stored as a blob
    record: Problem

    @field_serializer("record")
    def _whole_record(self, record: Problem) -> dict[str, Any]:
        # Every field of the problem, set or not: the manifest is a complete description.
        return record.model_dump(mode="json")


class ManifestConfig(_ManifestPart):
    resolved: dict[str, Any]  # Settings, masked (the settings of a resume come from here)
    sources: dict[str, str]  # dotted key -> default | file | env | flag

    @property
    def signing_key(self) -> str | None:
        recorded = self.resolved.get("signing_key")
        return recorded if isinstance(recorded, str) else None


class ManifestEndpoint(_ManifestPart):
    url: str
    api: Api
    source: str | None = None  # configured | local | serve
    gguf_sha256: str | None = None  # the embedded model's file, when source is local


class ManifestRoleEndpoint(_ManifestPart):
    """The endpoint of a role served apart from the run's (graders of another model family)."""

    url: str  # masked: user info and query values replaced by ***
    api: Api
    model: str | None = None


class ManifestModel(_ManifestPart):
    requested: str | None


class ManifestRoles(_ManifestPart):
    policy: dict[str, list[str]]  # role -> the input kinds it may see
    tools: list[str]  # every tool any role was offered (empty: the run used no tools)
    # role -> the tools its calls are offered, and the most tool calls one call may make;
    # absent in runs made before tools existed (no role was offered any)
    role_tools: dict[str, list[str]] = Field(default_factory=dict)
    max_tool_calls: dict[str, int] = Field(default_factory=dict)


class ManifestNetwork(_ManifestPart):
    allow: list[str]  # host:port
    enforcement: list[str]


class ManifestSigning(_ManifestPart):
    keyid: str
    public_key: str  # PEM


class Manifest(_ManifestPart):
    """MANIFEST.json: what a run is, written once when it is created. Keys that are absent
    from a run's file stay absent when it is written back (``to_json``), so the model reads
    and writes every run's manifest byte for byte."""

    format: Literal["solver-run/1", "solver-run/2"] = MANIFEST_FORMAT
    run_id: str
    created: str
    hash: Literal["sha256"] = "sha256"
    problem: ManifestProblem
    config: ManifestConfig
    argv: list[str]
    code: dict[str, Any]
    endpoint: ManifestEndpoint
    model: ManifestModel
    templates: dict[str, str]  # template name -> sha256 of its bytes
    roles: ManifestRoles
    evaluation: bool
    network: ManifestNetwork
    signing: ManifestSigning | None = None  # added by the store for a signed run
    given_proof: str | None = None  # a grading-only run's proof (`solver eval calibrate`)
    # Proofs of the same problem the given one is compared with, pairwise (`--comparisons`).
    rival_proofs: list[str] | None = None
    # Policy key -> its own endpoint, for the roles configured with one (absent: none).
    role_endpoints: dict[str, ManifestRoleEndpoint] | None = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)


# ---------------------------------------------------------------- final/result.json


class _ResultPart(BaseModel):
    # Written by the run itself; read back leniently (an older run's file may lack keys).
    model_config = ConfigDict(extra="allow", frozen=True)


class ResultProblem(_ResultPart):
    id: str
    digest: str
    points: int


class ResultSelection(_ResultPart):
    lineage: str
    version: int
    accepted: bool = False
    proof: str | None = None
    reason: str = ""


class ResultTokens(_ResultPart):
    input: int = 0
    output: int = 0
    reasoning: int = 0
    total: int = 0
    by_role: dict[str, int] = Field(default_factory=dict)


class ResultCalls(_ResultPart):
    total: int = 0
    by_role: dict[str, int] = Field(default_factory=dict)
    failed: int = 0
    truncated: int = 0


class ResultEvaluation(_ResultPart):
    scores: list[int | None]  # None: that grader gave no grade
    reconciled: bool


class RunResult(_ResultPart):
    """final/result.json: what a finished run concluded. A finished run resumed whose file
    cannot be read has only its ``outcome``; keys absent when read stay absent when written
    back (``to_json``)."""

    outcome: Outcome
    run_id: str | None = None
    problem: ResultProblem | None = None
    reason: str = ""
    selected: ResultSelection | None = None
    score: int | None = None  # the in-loop grade of the selected proof; None: ungraded
    evaluation_score: int | None = None
    answer_check: dict[str, Any] | None = None
    evaluation: ResultEvaluation | None = None
    tokens: ResultTokens = Field(default_factory=ResultTokens)
    calls: ResultCalls = Field(default_factory=ResultCalls)
    lineages: dict[str, str] = Field(default_factory=dict)  # lineage -> how it ended
    wall_s: float = 0.0
    sessions: int = 0
    budget_exhausted: str | None = None
    # why, for scripts (see solver.loop.finish.reason_code), and in words for people; absent
    # from runs made before they were written
    reason_code: str | None = None
    explanation: str | None = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)
