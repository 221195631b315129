"""Audit checks that understand the loop's records (registered into ``solver audit``).

- calls: every attempt started has exactly one outcome; every call planned has one ending.
- prompts: every prompt is the recorded template rendered on the recorded inputs, and every
  request body is re-produced byte for byte from those messages and the recorded parameters.
- isolation: every input of every call is of a kind the manifest's policy allows its role, is
  exactly the artifact it names, and reference material reached only evaluation graders after
  the solve phase; proofs and reports are re-derived from the raw responses, so no reasoning
  or self-assessment can hide in them.
- network: every connection recorded went to the allow-listed endpoint.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import roles
from solver.audit import AuditContext, Check, Status, capped, register_check
from solver.llm import (
    Message,
    decode_body,
    decode_stream,
    encode_request,
    fold_events,
    request_from_params,
)
from solver.store import Record

REFERENCE_KINDS = ("reference_solution", "grading_guidelines")
TERMINAL_ATTEMPT = ("llm.completed", "llm.failed", "llm.abandoned")
TERMINAL_CALL = ("call.completed", "call.failed", "call.cancelled")


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _blob(ctx: AuditContext, digest: str) -> bytes:
    return ctx.reader.read_blob(digest)


def _row(ctx: AuditContext, name: str, status: Status, detail: str, rec: Record) -> Check:
    """One check row about one journal record."""
    return Check(name=name, status=status, detail=detail, where=ctx.at(rec))


def _by_type(ctx: AuditContext, *types: str) -> list[Record]:
    return [r for r in ctx.records if r.type in types]


@register_check
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
                    _row(
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
                rows.append(_row(ctx, "calls", "fail", f"{call} planned twice", rec))
            open_calls[call] = rec
        elif rec.type in TERMINAL_CALL and open_calls.pop(call, None) is None:
            rows.append(
                _row(ctx, "calls", "fail", f"{rec.type} for {call}, which is not in flight", rec)
            )
    status: Status = "fail" if finished else "warn"
    for (call, attempt), rec in open_attempts.items():
        rows.append(
            _row(ctx, "calls", status, f"{call} attempt {attempt} started and has no outcome", rec)
        )
    for call, rec in open_calls.items():
        rows.append(
            Check(name="calls", status=status, detail=f"{call} has no ending", where=ctx.at(rec))
        )
    if not rows:
        planned = len(_by_type(ctx, "call.planned"))
        started = len(_by_type(ctx, "llm.started"))
        rows.append(
            Check(
                name="calls",
                status="pass",
                detail=f"{planned} calls, {started} attempts, each with exactly one outcome",
            )
        )
    return capped("calls", rows)


def _messages_from(raw: bytes) -> tuple[Message, ...]:
    pairs = json.loads(raw)
    return tuple(Message.text(role, text) for role, text in pairs)


@register_check
def check_prompts(ctx: AuditContext) -> list[Check]:
    rows: list[Check] = []
    digests = roles.template_digests()
    contexts: dict[str, Record] = {}
    for rec in _by_type(ctx, "context.built"):
        data = rec.data
        contexts[data["call_id"]] = rec
        for name, digest in data["templates"].items():
            if digests.get(name) != digest:
                rows.append(
                    _row(
                        ctx,
                        "prompts",
                        "fail",
                        f"{data['call_id']}: template {name} differs from the one used",
                        rec,
                    )
                )
        spec = roles.get_role(data["role"])
        inputs = spec.inputs_model.model_validate_json(_blob(ctx, data["inputs"]["blob"]))
        rendered = roles.render(data["role"], data["variant"], inputs)
        recorded = json.loads(_blob(ctx, data["messages"]["blob"]))
        if [list(m) for m in rendered] != recorded:
            rows.append(
                _row(
                    ctx,
                    "prompts",
                    "fail",
                    f"{data['call_id']}: messages are not the template rendered on the "
                    "recorded inputs",
                    rec,
                )
            )
    checked = 0
    for rec in _by_type(ctx, "llm.started"):
        data = rec.data
        built = contexts.get(data["call_id"])
        if built is None:
            rows.append(
                _row(
                    ctx,
                    "prompts",
                    "fail",
                    f"{data['call_id']}: request sent without a recorded context",
                    rec,
                )
            )
            continue
        messages = _messages_from(_blob(ctx, built.data["messages"]["blob"]))
        request = request_from_params(messages, data["params"])
        expected = encode_request(data["api"], request)
        if expected != _blob(ctx, data["request"]["blob"]):
            rows.append(
                _row(
                    ctx,
                    "prompts",
                    "fail",
                    f"{data['call_id']} attempt {data['attempt']}: the request body is "
                    "not re-produced from the template, inputs and parameters",
                    rec,
                )
            )
        checked += 1
    if not rows:
        rows.append(
            Check(
                name="prompts",
                status="pass",
                detail=f"{len(contexts)} contexts and {checked} request bodies re-produced "
                "byte for byte from the templates",
            )
        )
    return capped("prompts", rows)


def _field_matches(value: Any, links: list[dict[str, Any]], texts: dict[str, bytes]) -> bool:
    if isinstance(value, str):
        return len(links) == 1 and _digest(value.encode()) == links[0]["blob"]
    if isinstance(value, list):
        if len(links) == 1 and links[0]["blob"] in texts:
            try:
                return bool(json.loads(texts[links[0]["blob"]]) == value)
            except ValueError:
                return False
        return [_digest(str(v).encode()) for v in value] == [link["blob"] for link in links]
    return value is None and not links


def _response_text(ctx: AuditContext, call_id: str) -> str | None:
    started: dict[int, Record] = {}
    for rec in ctx.records:
        if rec.data.get("call_id") != call_id:
            continue
        if rec.type == "llm.started":
            started[rec.data["attempt"]] = rec
        elif rec.type == "llm.completed":
            raw = _blob(ctx, rec.data["response"]["blob"])
            request = started[rec.data["attempt"]]
            api = request.data["api"]
            if request.data["params"].get("stream", True):
                events = list(decode_stream(api, [raw]))
            else:
                events = decode_body(api, raw)
            return fold_events(events).text
    return None


def _derivation_ok(ctx: AuditContext, artifact: dict[str, Any], content: bytes) -> bool:
    text = _response_text(ctx, artifact["producer"])
    if text is None:
        return False
    if artifact["kind"] == "proof_text":
        return roles.extract_proof(text).proof.encode() == content
    return (roles.strip_thinking(text).strip() or "(empty report)").encode() == content


def _check_link(
    ctx: AuditContext,
    rec: Record,
    call_id: str,
    role: str,
    allowed: set[str],
    link: dict[str, Any],
    artifacts: dict[str, dict[str, Any]],
    calls: dict[str, dict[str, Any]],
    solve_ended: bool,
    fail: Any,
) -> None:
    kind = link["kind"]
    if kind not in allowed:
        fail(f"{call_id}: role {role} may not see {kind}", rec)
    source = artifacts.get(link["artifact"])
    if source is None:
        fail(f"{call_id}: input {link['artifact']} was not recorded before", rec)
        return
    if source["blob"]["blob"] != link["blob"] or source["kind"] != kind:
        fail(f"{call_id}: input {link['artifact']} is not the recorded one", rec)
    in_evaluation = calls.get(call_id, {}).get("phase") == "evaluate"
    if kind in REFERENCE_KINDS and not (solve_ended and in_evaluation):
        fail(f"{call_id}: {kind} reached a call before the solve phase ended", rec)


@register_check
def check_isolation(ctx: AuditContext) -> list[Check]:
    rows: list[Check] = []
    policy = {k: set(v) for k, v in ctx.manifest.get("roles", {}).get("policy", {}).items()}
    artifacts: dict[str, dict[str, Any]] = {}
    solve_ended = False
    calls: dict[str, dict[str, Any]] = {}
    texts: dict[str, bytes] = {}
    derived = 0

    def fail(detail: str, rec: Record) -> None:
        rows.append(_row(ctx, "isolation", "fail", detail, rec))

    for rec in ctx.records:
        data = rec.data
        if rec.type == "decision" and data.get("kind") == "phase" and data.get("phase") != "solve":
            solve_ended = True
        elif rec.type == "call.planned":
            calls[data["call_id"]] = data
        elif rec.type == "artifact.put":
            artifacts[data["artifact"]] = data
            content = _blob(ctx, data["blob"]["blob"])
            texts[data["blob"]["blob"]] = content
            if data["kind"] in ("proof_text", "verification_report") and data["producer"] in calls:
                derived += 1
                if not _derivation_ok(ctx, data, content):
                    fail(
                        f"artifact {data['artifact']} ({data['kind']}) is not what its "
                        f"producer {data['producer']} returned, stripped",
                        rec,
                    )
        elif rec.type == "context.built":
            call_id, role = data["call_id"], data["role"]
            allowed = policy.get(role)
            if allowed is None:
                fail(f"{call_id}: role {role} has no isolation policy in the manifest", rec)
                continue
            inputs = json.loads(_blob(ctx, data["inputs"]["blob"]))
            for field in sorted(set(inputs) | set(data["links"])):
                links = data["links"].get(field, [])
                for link in links:
                    _check_link(
                        ctx, rec, call_id, role, allowed, link, artifacts, calls, solve_ended, fail
                    )
                if not _field_matches(inputs.get(field), links, texts):
                    fail(f"{call_id}: input {field} differs from the artifacts it names", rec)
    if not rows:
        contexts = len(_by_type(ctx, "context.built"))
        rows.append(
            Check(
                name="isolation",
                status="pass",
                detail=f"{contexts} contexts use only inputs their role may see; "
                f"{derived} proofs and reports re-derived from raw responses",
            )
        )
    return capped("isolation", rows)


@register_check
def check_network(ctx: AuditContext) -> list[Check]:
    allow = set(ctx.manifest.get("network", {}).get("allow", []))
    rows: list[Check] = []
    connects = _by_type(ctx, "net.connect")
    for rec in connects:
        target = f"{rec.data['host']}:{rec.data['port']}"
        if target not in allow:
            rows.append(
                _row(
                    ctx,
                    "network",
                    "fail",
                    f"connection to {target} ({rec.data['address']}) is not allow-listed",
                    rec,
                )
            )
    if not rows:
        rows.append(
            Check(
                name="network",
                status="pass",
                detail=f"{len(connects)} connections, all to {', '.join(sorted(allow)) or '-'}",
            )
        )
    return rows
