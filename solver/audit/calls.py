"""Audit checks that understand the loop's records (registered into ``solver audit``; the
``prompts`` and ``network`` checks live in ``audit_prompts`` and ``audit_network``).

- calls: every attempt started has exactly one outcome; every call planned has one ending.
- isolation: the manifest's policy allows no role more than this solver's policy and no call
  offered tools; every input of every call is of a kind the policy allows its role, is exactly
  the artifact it names, and reference material (a drafted marking scheme included) reached
  only evaluation calls after the solve phase; proofs, reports, marking schemes and graders'
  judgments are re-derived from the raw responses, so no reasoning or self-assessment can
  hide in them, and a proof written from other proofs (a revision, a recombination, a
  self-improvement turn) must hold no talk about them; the derived inputs (a reviser's
  confirmed findings, a recombiner's pool of proofs with their confirmed findings, a
  selector's anonymised proofs) are rebuilt from the journal by the loop's own code and must
  match byte for byte, and a selector (the pairwise one: exactly two) is shown only final
  candidates.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from solver import roles
from solver.audit.base import AuditContext, Check, Status, capped
from solver.audit.records import (
    Exchanges,
    completion_of,
    digest_of,
    read_blob,
    records_of,
    row_about,
)
from solver.loop.contexts import DERIVED_SUFFIX, ContextBuilder
from solver.loop.policy import final_versions
from solver.loop.state import CallState, RunState, reviews_of
from solver.loop.tools import TOOL_NAMES, python_code, result_content
from solver.problems import Problem
from solver.records import parse_loop_record
from solver.roles import reviser, rubric_writer, verifier
from solver.store import BlobRef, Record, RunStore

# Material from the organisers, or drafted from it: evaluation calls only, after the solve phase.
REDERIVED_KINDS = ("proof_text", "verification_report", "marking_scheme", "grader_judgments")
TERMINAL_ATTEMPT = ("llm.completed", "llm.failed", "llm.abandoned")
TERMINAL_CALL = ("call.completed", "call.failed", "call.cancelled")


def check_call_outcomes(ctx: AuditContext) -> list[Check]:
    finished = ctx.finished is not None
    rows: list[Check] = []
    open_attempts: dict[tuple[str, int], Record] = {}
    open_calls: dict[str, Record] = {}
    for rec in ctx.records:
        call = str(rec.data.get("call_id", ""))
        if rec.type == "llm.started":
            open_attempts[(call, rec.data["attempt"])] = rec
        elif rec.type in TERMINAL_ATTEMPT:
            key = (call, rec.data["attempt"])
            if key not in open_attempts:
                rows.append(
                    row_about(
                        ctx,
                        "calls",
                        "fail",
                        f"{rec.type} for {call} attempt {key[1]} that is not open",
                        rec,
                    )
                )
            open_attempts.pop(key, None)
        elif rec.type == "call.planned":
            if call in open_calls:
                rows.append(row_about(ctx, "calls", "fail", f"{call} planned twice", rec))
            open_calls[call] = rec
        elif rec.type in TERMINAL_CALL and open_calls.pop(call, None) is None:
            rows.append(
                row_about(
                    ctx, "calls", "fail", f"{rec.type} for {call}, which is not in flight", rec
                )
            )
    status: Status = "fail" if finished else "warn"
    for (call, attempt), rec in open_attempts.items():
        rows.append(
            row_about(
                ctx, "calls", status, f"{call} attempt {attempt} started and has no outcome", rec
            )
        )
    for call, rec in open_calls.items():
        rows.append(
            Check(name="calls", status=status, detail=f"{call} has no ending", where=ctx.at(rec))
        )
    if not rows:
        planned = len(records_of(ctx, "call.planned"))
        started = len(records_of(ctx, "llm.started"))
        rows.append(
            Check(
                name="calls",
                status="pass",
                detail=f"{planned} calls, {started} attempts, each with exactly one outcome",
            )
        )
    return capped("calls", rows)


def _field_matches(value: Any, links: list[dict[str, Any]], texts: dict[str, bytes]) -> bool:
    if isinstance(value, str):
        return len(links) == 1 and digest_of(value.encode()) == links[0]["blob"]
    if isinstance(value, list):
        if len(links) == 1 and links[0]["blob"] in texts:
            # One artifact holding the whole list as JSON (a selector's proofs), or a list of
            # one text (a re-judging grader's one other judgment): either matches.
            try:
                if json.loads(texts[links[0]["blob"]]) == value:
                    return True
            except ValueError:
                pass
        return [digest_of(str(v).encode()) for v in value] == [link["blob"] for link in links]
    return value is None and not links


@dataclass
class _Attempts:
    """Attempts by call, indexed once: looking them up per artifact would scan the journal
    once per proof or report, quadratic on long runs."""

    started: dict[tuple[str, int], Record] = field(default_factory=dict)
    completed: dict[str, Record] = field(default_factory=dict)

    @classmethod
    def index(cls, ctx: AuditContext) -> _Attempts:
        found = cls()
        for rec in ctx.records:
            if rec.type == "llm.started":
                found.started[(str(rec.data.get("call_id")), rec.data["attempt"])] = rec
            elif rec.type == "llm.completed":
                # the last: a call with tools answers in its last turn (the only one else)
                found.completed[str(rec.data.get("call_id"))] = rec
        return found


def _response_text(ctx: AuditContext, attempts: _Attempts, call_id: str) -> str | None:
    rec = attempts.completed.get(call_id)
    if rec is None:
        return None
    return completion_of(ctx, attempts.started[(call_id, rec.data["attempt"])], rec).text


def _derivation_ok(
    ctx: AuditContext,
    attempts: _Attempts,
    artifact: dict[str, Any],
    content: bytes,
    producer_role: str = "",
) -> bool:
    text = _response_text(ctx, attempts, artifact["producer"])
    if text is None:
        return False
    if artifact["kind"] == "proof_text":
        proof = roles.extract_proof(text).proof
        if producer_role not in ("", "generator") and reviser.commentary(proof) is not None:
            return False  # a proof written from others must stand alone
        return proof.encode() == content
    if artifact["kind"] == "marking_scheme":
        return rubric_writer.format_scheme(rubric_writer.parse(text)).encode() == content
    if artifact["kind"] == "grader_judgments":
        return (roles.strip_thinking(text).strip() or "(empty judgment)").encode() == content
    return verifier.format_report(verifier.parse(text)).encode() == content


class _DigestOnlyStore:
    """What ContextBuilder asks of a store, read-only: reads come from the run and a "write"
    only names the bytes, so the audit runs the loop's own derivation and writes nothing."""

    def __init__(self, ctx: AuditContext) -> None:
        self.ctx = ctx

    def read_blob(self, ref: str) -> bytes:
        return read_blob(self.ctx, ref)

    def put_blob(self, data: bytes) -> BlobRef:
        return BlobRef(digest=digest_of(data), size=len(data))


class _Rederiver:
    """Folds the journal as the engine did and rebuilds each derived input, at the point it
    was recorded, with the loop's own ContextBuilder (so the audit cannot drift from it)."""

    def __init__(self, ctx: AuditContext) -> None:
        self.state = RunState()
        self.broken = ""
        self.builder: ContextBuilder | None = None
        try:
            problem = Problem.model_validate(ctx.manifest["problem"]["record"])
            resolved = ctx.manifest["config"]["resolved"]
            seed = int(resolved["seed"])
        except (KeyError, TypeError, ValueError) as exc:
            self.broken = f"the manifest has no usable problem record or seed ({exc!s:.80})"
            return
        # a run without reviews shows the reviser its failing reports' findings as reported
        self.state.reviews = reviews_of(resolved)
        store = cast(RunStore, _DigestOnlyStore(ctx))
        self.builder = ContextBuilder(store, self.state, problem, seed=seed)

    def fold(self, rec: Record) -> None:
        if self.broken:
            return
        try:
            typed = parse_loop_record(rec.type, rec.v, rec.data)
            if typed is not None:
                self.state.apply(typed, rec.t)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self.broken = f"record {rec.seq} cannot be folded into the loop's state ({exc!r:.80})"

    def mismatch(self, data: dict[str, Any]) -> str | None:
        """Why the recorded derived artifact is not the one the loop derives, or None."""
        if self.broken or self.builder is None:
            return f"cannot be re-derived: {self.broken}"
        kind = str(data["kind"])
        suffix = DERIVED_SUFFIX[kind]
        call_id = str(data["artifact"]).removesuffix(suffix)
        call: CallState | None = self.state.calls.get(call_id)
        # the call must be of a role whose Inputs declare the kind (one role per derived kind)
        if (
            call is None
            or kind not in roles.ISOLATION_POLICY.get(call.role, ())
            or not str(data["artifact"]).endswith(suffix)
        ):
            return f"names no {_taker(kind)} call"
        try:
            if kind == "anonymised_proofs":
                why = _shown_problem(self.state, call, self.builder.shown_to(call))
                if why is not None:
                    return why
            expected = self.builder.derived_artifact(kind, call).model_dump(mode="json")
        except (AssertionError, KeyError, TypeError, ValueError, IndexError) as exc:
            return f"cannot be re-derived from the journal ({exc!r:.80})"
        if expected["blob"]["blob"] != data["blob"]["blob"]:
            return "is not what the recorded findings, reviews and proofs derive"
        if expected["producer"] != data.get("producer"):
            return f"names producer {data.get('producer')}, not {expected['producer']}"
        return None


def _taker(kind: str) -> str:
    """The roles whose Inputs declare ``kind``, for a message."""
    return " or ".join(sorted(r for r, kinds in roles.ISOLATION_POLICY.items() if kind in kinds))


def _shown_problem(state: RunState, call: CallState, shown: list[tuple[str, int]]) -> str | None:
    """Why a selector call's proofs are not what a selector may be shown, or None: only final
    candidates (each lineage's submitted version, as graded), and for a pairwise call
    exactly two different ones."""
    finals = {(v.lineage, v.version) for v in final_versions(state)}
    if call.variant == "pairwise" and (len(shown) != 2 or shown[0] == shown[1]):
        return f"shows {len(set(shown))} different proofs to a pairwise selector, not 2"
    outside = [f"{ln}.v{v}" for ln, v in shown if (ln, v) not in finals]
    if outside:
        return f"shows {', '.join(outside)}, which is no final candidate"
    return None


def _check_link(
    ctx: AuditContext,
    rec: Record,
    call_id: str,
    role: str,
    allowed: frozenset[str],
    link: dict[str, Any],
    artifacts: dict[str, dict[str, Any]],
    calls: dict[str, dict[str, Any]],
    solve_ended: bool,
    fail: Any,
) -> None:
    kind = link["kind"]
    if kind not in allowed:
        fail(f"{call_id}: role {role} may not see {kind}", rec)
    if kind in DERIVED_SUFFIX and link["artifact"] != call_id + DERIVED_SUFFIX[kind]:
        fail(f"{call_id}: input {link['artifact']} was derived for another call", rec)
    source = artifacts.get(link["artifact"])
    if source is None:
        fail(f"{call_id}: input {link['artifact']} was not recorded before", rec)
        return
    if source["blob"]["blob"] != link["blob"] or source["kind"] != kind:
        fail(f"{call_id}: input {link['artifact']} is not the recorded one", rec)
    in_evaluation = calls.get(call_id, {}).get("phase") == "evaluate"
    if kind in roles.REFERENCE_KINDS and not (solve_ended and in_evaluation):
        fail(f"{call_id}: {kind} reached a call before the solve phase ended", rec)


def _policy_rows(ctx: AuditContext) -> list[Check]:
    """The manifest must state this solver's isolation policy and offer no tools."""
    rows: list[Check] = []
    declared = ctx.manifest.get("roles", {})
    if not declared and not records_of(ctx, "context.built"):
        return rows  # a run of the store alone: no role ever saw anything
    policy = {k: sorted(v) for k, v in (declared.get("policy") or {}).items()}
    current = roles.isolation_policy_record()
    # A run made before a role (or an input kind) was added declares less than this solver
    # allows, never more: each declared role must be allowed at most what it is allowed now.
    if not policy or any(not set(kinds) <= set(current.get(k, ())) for k, kinds in policy.items()):
        rows.append(
            Check(
                name="isolation",
                status="fail",
                detail="the manifest's isolation policy is not this solver's roles policy",
                where="MANIFEST.json",
            )
        )
    offered = set(declared.get("tools") or ())
    per_role = {name for names in (declared.get("role_tools") or {}).values() for name in names}
    if not offered <= set(TOOL_NAMES) or per_role != offered:
        rows.append(
            Check(
                name="isolation",
                status="fail",
                detail=f"the manifest offers tools this solver does not have or does not "
                f"give a role ({', '.join(sorted(offered | per_role))})",
                where="MANIFEST.json",
            )
        )
    return rows


def _tool_rows(
    ctx: AuditContext,
    rec: Record,
    exchanges: Exchanges,
    fail: Callable[[str, Record], None],
) -> None:
    """A tool call ran only what the calling model itself wrote in that call, and the model
    was given back exactly the sandbox's output of it: no other material enters a call
    through its tools (the re-execution itself is the ``tools`` check)."""
    data = rec.data
    call_id, attempt, index = data["call_id"], data["attempt"], data["index"]
    completion = exchanges.response(ctx, call_id, attempt)
    if completion is None or index >= len(completion.tool_calls):
        fail(f"{call_id}: a tool execution no response of the call asked for", rec)
        return
    asked = completion.tool_calls[index]
    if asked.id != data["tool_call_id"] or asked.name != data["tool"]:
        fail(f"{call_id}: tool execution {index} is not the tool call its response made", rec)
        return
    if data["status"] == "ran":
        code = python_code(asked.arguments)
        if (
            data["code"] is None
            or code is None
            or read_blob(ctx, data["code"]["blob"]) != (code.encode("utf-8"))
        ):
            fail(f"{call_id}: tool execution {index} ran other code than the model wrote", rec)
            return
        if data["result"] is None:
            fail(f"{call_id}: tool execution {index} ran but records no result", rec)
            return
        record = json.loads(read_blob(ctx, data["result"]["blob"]))
        if read_blob(ctx, data["content"]["blob"]).decode("utf-8") != result_content(record):
            fail(f"{call_id}: tool execution {index} gave the model other than its output", rec)
    elif data["code"] is not None or data["result"] is not None:
        fail(f"{call_id}: a refused tool call records code or a result", rec)


def check_isolation(ctx: AuditContext) -> list[Check]:
    rows: list[Check] = _policy_rows(ctx)
    policy = roles.ISOLATION_POLICY
    attempts = _Attempts.index(ctx)
    rederiver = _Rederiver(ctx)
    artifacts: dict[str, dict[str, Any]] = {}
    solve_ended = False
    calls: dict[str, dict[str, Any]] = {}
    texts: dict[str, bytes] = {}
    derived = rebuilt = executions = 0
    exchanges = Exchanges()
    role_tools: dict[str, list[str]] = ctx.manifest.get("roles", {}).get("role_tools") or {}

    def fail(detail: str, rec: Record) -> None:
        rows.append(row_about(ctx, "isolation", "fail", detail, rec))

    for rec in ctx.records:
        data = rec.data
        exchanges.fold(rec)
        if rec.type == "decision" and data.get("kind") == "phase" and data.get("phase") != "solve":
            solve_ended = True
        elif rec.type == "call.planned":
            calls[data["call_id"]] = data
        elif rec.type == "llm.started" and (data.get("params") or {}).get("tools"):
            role = str(calls.get(data.get("call_id", ""), {}).get("role", ""))
            names = {t.get("name") for t in data["params"]["tools"]}
            if not names <= set(role_tools.get(role, ())):
                fail(f"{data.get('call_id')}: the model was offered tools its role has not", rec)
        elif rec.type == "tool.executed":
            executions += 1
            _tool_rows(ctx, rec, exchanges, fail)
        elif rec.type == "artifact.put":
            artifacts[data["artifact"]] = data
            content = read_blob(ctx, data["blob"]["blob"])
            texts[data["blob"]["blob"]] = content
            if data["kind"] in REDERIVED_KINDS and data["producer"] in calls:
                derived += 1
                role = str(calls[data["producer"]].get("role", ""))
                if not _derivation_ok(ctx, attempts, data, content, role):
                    fail(
                        f"artifact {data['artifact']} ({data['kind']}) is not what its "
                        f"producer {data['producer']} returned, stripped",
                        rec,
                    )
            elif data["kind"] in DERIVED_SUFFIX:
                rebuilt += 1
                why = rederiver.mismatch(data)
                if why is not None:
                    fail(f"artifact {data['artifact']} ({data['kind']}) {why}", rec)
        elif rec.type == "context.built":
            call_id, role = data["call_id"], data["role"]
            allowed = policy.get(role)
            if allowed is None:
                fail(f"{call_id}: role {role} has no isolation policy", rec)
                continue
            inputs = json.loads(read_blob(ctx, data["inputs"]["blob"]))
            for name in sorted(set(inputs) | set(data["links"])):
                links = data["links"].get(name, [])
                for link in links:
                    _check_link(
                        ctx, rec, call_id, role, allowed, link, artifacts, calls, solve_ended, fail
                    )
                if not _field_matches(inputs.get(name), links, texts):
                    fail(f"{call_id}: input {name} differs from the artifacts it names", rec)
        rederiver.fold(rec)
    if not rows:
        contexts = len(records_of(ctx, "context.built"))
        rows.append(
            Check(
                name="isolation",
                status="pass",
                detail=f"{contexts} contexts use only inputs their role may see; "
                f"{derived} proofs and reports re-derived from raw responses; "
                f"{rebuilt} findings and proof lists rebuilt from the journal"
                + (
                    f"; {executions} tool calls ran only their own call's code"
                    if executions
                    else ""
                ),
            )
        )
    return capped("isolation", rows)
