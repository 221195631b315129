"""Audit checks that understand the loop's records (registered into ``solver audit``).

- calls: every attempt started has exactly one outcome; every call planned has one ending.
- prompts: every prompt is the recorded template rendered on the recorded inputs, and every
  request body is re-produced byte for byte from those messages and the recorded parameters.
- isolation: the manifest's policy is this solver's policy and no call offered tools; every
  input of every call is of a kind the policy allows its role, is exactly the artifact it
  names, and reference material reached only evaluation graders after the solve phase; proofs
  and reports are re-derived from the raw responses, so no reasoning or self-assessment can
  hide in them; the derived inputs (a reviser's confirmed findings, a selector's anonymised
  proofs) are rebuilt from the journal by the loop's own code and must match byte for byte.
- network: the peer address of every connection recorded is the allow-listed endpoint.

Prompts are rendered from the template bytes stored in the run when it has them, so a run
audits the same under a newer solver; an older run without them needs the same templates.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import jinja2

import roles
from roles.templates import environment_from, render_template
from solver.audit import AuditContext, Check, Status, capped, register_check
from solver.llm import (
    Message,
    decode_body,
    decode_stream,
    encode_request,
    fold_events,
    request_from_params,
)
from solver.loop.contexts import ContextBuilder
from solver.loop.state import CallState, RunState
from solver.problems import Problem
from solver.store import BlobRef, Record, RunStore

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


class _Templates:
    """Where the audit takes a run's templates from: the bytes stored in the run under the
    manifest's digests (runs that store them), else the installed ones when their digests are
    the recorded ones. Neither: the run was made with other templates and cannot be rendered."""

    def __init__(self, ctx: AuditContext) -> None:
        self.ctx = ctx
        self.manifest: dict[str, str] = dict(ctx.manifest.get("templates") or {})
        self.installed = roles.template_digests()
        self.stored = environment_from(self._stored_source)
        self.other_templates: set[str] = set()

    def _stored_source(self, name: str) -> bytes | None:
        digest = self.manifest.get(name)
        if digest is None or digest not in self.ctx.blob_files:
            return None
        data = _blob(self.ctx, digest)
        return data if _digest(data) == digest else None

    def environment(self, used: dict[str, str]) -> jinja2.Environment | None:
        """The environment that renders a context which used ``used`` (name -> digest)."""
        if all(self.manifest.get(n) == d and d in self.ctx.blob_files for n, d in used.items()):
            return self.stored
        if all(self.installed.get(n) == d for n, d in used.items()):
            return None  # the installed templates are the recorded ones
        self.other_templates.update(n for n, d in used.items() if self.installed.get(n) != d)
        raise LookupError("run made with other templates")


def _render(
    env: jinja2.Environment | None, role: str, variant: str, inputs: Any
) -> list[list[str]]:
    """``roles.render`` with a chosen template environment (None: the installed one)."""
    if env is None:
        return [list(m) for m in roles.render(role, variant, inputs)]
    roles.check_isolation(role, inputs)
    system, user = roles.get_role(role).templates[variant]
    context = {name: getattr(inputs, name) for name in type(inputs).model_fields}
    return [
        ["system", render_template(system, context, env)],
        ["user", render_template(user, context, env)],
    ]


@register_check
def check_prompts(ctx: AuditContext) -> list[Check]:
    rows: list[Check] = []
    templates = _Templates(ctx)
    contexts: dict[str, Record] = {}
    for rec in _by_type(ctx, "context.built"):
        data = rec.data
        contexts[data["call_id"]] = rec
        used: dict[str, str] = data["templates"]
        for name, digest in used.items():
            if templates.manifest and templates.manifest.get(name) != digest:
                rows.append(
                    _row(
                        ctx,
                        "prompts",
                        "fail",
                        f"{data['call_id']}: template {name} is not the one the manifest names",
                        rec,
                    )
                )
        try:
            env = templates.environment(used)
        except LookupError:
            continue  # reported once below, not as a false prompt mismatch per call
        spec = roles.get_role(data["role"])
        inputs = spec.inputs_model.model_validate_json(_blob(ctx, data["inputs"]["blob"]))
        rendered = _render(env, data["role"], data["variant"], inputs)
        recorded = json.loads(_blob(ctx, data["messages"]["blob"]))
        if rendered != recorded:
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
    if templates.other_templates:
        names = sorted(templates.other_templates)
        rows.insert(
            0,
            Check(
                name="prompts",
                status="fail",
                detail="run made with other templates: the run does not store them and this "
                f"solver's differ ({', '.join(names[:5])}{' ...' if len(names) > 5 else ''}); "
                "audit it with the solver version that made it",
                where="MANIFEST.json",
            ),
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
                found.completed.setdefault(str(rec.data.get("call_id")), rec)
        return found


def _response_text(ctx: AuditContext, attempts: _Attempts, call_id: str) -> str | None:
    rec = attempts.completed.get(call_id)
    if rec is None:
        return None
    request = attempts.started[(call_id, rec.data["attempt"])]
    raw = _blob(ctx, rec.data["response"]["blob"])
    api = request.data["api"]
    if request.data["params"].get("stream", True):
        events = list(decode_stream(api, [raw]))
    else:
        events = decode_body(api, raw)
    return fold_events(events).text


def _derivation_ok(
    ctx: AuditContext, attempts: _Attempts, artifact: dict[str, Any], content: bytes
) -> bool:
    text = _response_text(ctx, attempts, artifact["producer"])
    if text is None:
        return False
    if artifact["kind"] == "proof_text":
        return roles.extract_proof(text).proof.encode() == content
    return (roles.strip_thinking(text).strip() or "(empty report)").encode() == content


class _DigestOnlyStore:
    """What ContextBuilder asks of a store, read-only: reads come from the run and a "write"
    only names the bytes, so the audit runs the loop's own derivation and writes nothing."""

    def __init__(self, ctx: AuditContext) -> None:
        self.ctx = ctx

    def read_blob(self, ref: str) -> bytes:
        return _blob(self.ctx, ref)

    def put_blob(self, data: bytes) -> BlobRef:
        return BlobRef(digest=_digest(data), size=len(data))


# Derived input kind -> (the role whose call it feeds, the artifact name's suffix).
DERIVED = {
    "confirmed_findings": ("reviser", ".findings"),
    "anonymised_proofs": ("selector", ".proofs"),
}


class _Rederiver:
    """Folds the journal as the engine did and rebuilds each derived input, at the point it
    was recorded, with the loop's own ContextBuilder (so the audit cannot drift from it)."""

    def __init__(self, ctx: AuditContext) -> None:
        self.state = RunState()
        self.broken = ""
        self.builder: ContextBuilder | None = None
        try:
            problem = Problem.model_validate(ctx.manifest["problem"]["record"])
            seed = int(ctx.manifest["config"]["resolved"]["seed"])
        except (KeyError, TypeError, ValueError) as exc:
            self.broken = f"the manifest has no usable problem record or seed ({exc!s:.80})"
            return
        store = cast(RunStore, _DigestOnlyStore(ctx))
        self.builder = ContextBuilder(store, self.state, problem, seed=seed)

    def fold(self, rec: Record) -> None:
        if self.broken:
            return
        try:
            self.state.apply_raw(rec.type, rec.data, rec.t)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self.broken = f"record {rec.seq} cannot be folded into the loop's state ({exc!r:.80})"

    def mismatch(self, data: dict[str, Any]) -> str | None:
        """Why the recorded derived artifact is not the one the loop derives, or None."""
        if self.broken or self.builder is None:
            return f"cannot be re-derived: {self.broken}"
        role, suffix = DERIVED[data["kind"]]
        call_id = str(data["artifact"]).removesuffix(suffix)
        call: CallState | None = self.state.calls.get(call_id)
        if call is None or call.role != role or not str(data["artifact"]).endswith(suffix):
            return f"names no {role} call"
        build: Callable[[CallState], Any] = (
            self.builder._confirmed_findings_artifact
            if role == "reviser"
            else self.builder._anonymised_proofs_artifact
        )
        try:
            expected = build(call).model_dump(mode="json")
        except (AssertionError, KeyError, TypeError, ValueError, IndexError) as exc:
            return f"cannot be re-derived from the journal ({exc!r:.80})"
        if expected["blob"]["blob"] != data["blob"]["blob"]:
            return "is not what the recorded findings, reviews and proofs derive"
        if expected["producer"] != data.get("producer"):
            return f"names producer {data.get('producer')}, not {expected['producer']}"
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
    if kind in DERIVED and link["artifact"] != call_id + DERIVED[kind][1]:
        fail(f"{call_id}: input {link['artifact']} was derived for another call", rec)
    source = artifacts.get(link["artifact"])
    if source is None:
        fail(f"{call_id}: input {link['artifact']} was not recorded before", rec)
        return
    if source["blob"]["blob"] != link["blob"] or source["kind"] != kind:
        fail(f"{call_id}: input {link['artifact']} is not the recorded one", rec)
    in_evaluation = calls.get(call_id, {}).get("phase") == "evaluate"
    if kind in REFERENCE_KINDS and not (solve_ended and in_evaluation):
        fail(f"{call_id}: {kind} reached a call before the solve phase ended", rec)


def _policy_rows(ctx: AuditContext) -> list[Check]:
    """The manifest must state this solver's isolation policy and offer no tools."""
    rows: list[Check] = []
    declared = ctx.manifest.get("roles", {})
    if not declared and not _by_type(ctx, "context.built"):
        return rows  # a run of the store alone: no role ever saw anything
    policy = {k: sorted(v) for k, v in (declared.get("policy") or {}).items()}
    if policy != roles.isolation_policy_record():
        rows.append(
            Check(
                name="isolation",
                status="fail",
                detail="the manifest's isolation policy is not this solver's roles policy",
                where="MANIFEST.json",
            )
        )
    if declared.get("tools"):
        rows.append(
            Check(
                name="isolation",
                status="fail",
                detail="the manifest offers the model tools",
                where="MANIFEST.json",
            )
        )
    return rows


@register_check
def check_isolation(ctx: AuditContext) -> list[Check]:
    rows: list[Check] = _policy_rows(ctx)
    policy = roles.ISOLATION_POLICY
    attempts = _Attempts.index(ctx)
    rederiver = _Rederiver(ctx)
    artifacts: dict[str, dict[str, Any]] = {}
    solve_ended = False
    calls: dict[str, dict[str, Any]] = {}
    texts: dict[str, bytes] = {}
    derived = rebuilt = 0

    def fail(detail: str, rec: Record) -> None:
        rows.append(_row(ctx, "isolation", "fail", detail, rec))

    for rec in ctx.records:
        data = rec.data
        if rec.type == "decision" and data.get("kind") == "phase" and data.get("phase") != "solve":
            solve_ended = True
        elif rec.type == "call.planned":
            calls[data["call_id"]] = data
        elif rec.type == "llm.started" and (data.get("params") or {}).get("tools"):
            fail(f"{data.get('call_id')}: the model was offered tools", rec)
        elif rec.type == "artifact.put":
            artifacts[data["artifact"]] = data
            content = _blob(ctx, data["blob"]["blob"])
            texts[data["blob"]["blob"]] = content
            if data["kind"] in ("proof_text", "verification_report") and data["producer"] in calls:
                derived += 1
                if not _derivation_ok(ctx, attempts, data, content):
                    fail(
                        f"artifact {data['artifact']} ({data['kind']}) is not what its "
                        f"producer {data['producer']} returned, stripped",
                        rec,
                    )
            elif data["kind"] in DERIVED:
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
            inputs = json.loads(_blob(ctx, data["inputs"]["blob"]))
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
        contexts = len(_by_type(ctx, "context.built"))
        rows.append(
            Check(
                name="isolation",
                status="pass",
                detail=f"{contexts} contexts use only inputs their role may see; "
                f"{derived} proofs and reports re-derived from raw responses; "
                f"{rebuilt} findings and proof lists rebuilt from the journal",
            )
        )
    return capped("isolation", rows)


def _host_port(text: str) -> tuple[str, int] | None:
    """``host:port``, ``ip:port`` or ``[ipv6]:port`` (an IPv6 peer may come without brackets)."""
    host, sep, port = str(text).rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    return host.strip("[]").lower(), int(port)


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _peer_allowed(peer: tuple[str, int], allowed: tuple[str, int]) -> bool | None:
    """True or False when the recorded peer can be judged offline; None when the allow-list
    names a host by a DNS name other than localhost, whose addresses are not recorded."""
    address, port = peer
    host, allowed_port = allowed
    peer_ip = _ip(address)
    if port != allowed_port or peer_ip is None:
        return False
    allowed_ip = _ip(host)
    if allowed_ip is not None:
        return peer_ip == allowed_ip
    if host == "localhost":
        return peer_ip.is_loopback
    return None


@register_check
def check_network(ctx: AuditContext) -> list[Check]:
    """Judged on the peer address each connection reached (what the socket reports), not
    on the host the client meant to reach, which is the same constant in every record."""
    allow_list = [str(a) for a in ctx.manifest.get("network", {}).get("allow", [])]
    allowed = [p for p in (_host_port(a) for a in allow_list) if p is not None]
    rows: list[Check] = []
    unverifiable = 0
    connects = _by_type(ctx, "net.connect")
    for rec in connects:
        address = str(rec.data.get("address") or "")
        peer = _host_port(address)
        verdicts = [_peer_allowed(peer, a) for a in allowed] if peer else []
        if any(v is True for v in verdicts):
            continue
        if any(v is None for v in verdicts):
            unverifiable += 1
            continue
        shown = address or "no peer address recorded"
        rows.append(
            _row(
                ctx,
                "network",
                "fail",
                f"connection to {shown} (meant for {rec.data.get('host')}:"
                f"{rec.data.get('port')}) is not the allow-listed endpoint",
                rec,
            )
        )
    if unverifiable:
        rows.append(
            Check(
                name="network",
                status="warn",
                detail=f"{unverifiable} connections reached the allow-listed port of a host "
                "named by DNS; which addresses that name had cannot be checked offline",
            )
        )
    if not rows:
        rows.append(
            Check(
                name="network",
                status="pass",
                detail=f"{len(connects)} connections, all to "
                f"{', '.join(sorted(allow_list)) or '-'}",
            )
        )
    return capped("network", rows)
