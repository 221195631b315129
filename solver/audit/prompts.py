"""Audit check ``prompts``: every prompt is the recorded template rendered on the recorded
inputs, and every request body is re-produced byte for byte from those messages and the
recorded parameters.

Prompts are rendered from the template bytes stored in the run when it has them, so a run
audits the same under a newer solver; an older run without them needs the same templates.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jinja2

from solver import roles
from solver.audit.base import AuditContext, Check, capped
from solver.audit.records import Exchanges, digest_of, read_blob, records_of, row_about
from solver.roles import environment_from, render_template
from solver.store import Record
from solver.wire import Message, encode_request, request_from_params


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
        # templates a session added (a resume by a newer solver): from its record on
        self.added: list[tuple[int, dict[str, str]]] = [
            (rec.seq, dict(rec.data.get("templates") or {}))
            for rec in records_of(ctx, "session.started")
            if rec.data.get("templates")
        ]
        self._mixed: dict[frozenset[tuple[str, str]], jinja2.Environment] = {}

    def named(self, name: str, digest: str, seq: int) -> bool:
        """Whether the manifest, or a session started before record ``seq``, names it."""
        if self.manifest.get(name) == digest:
            return True
        return any(at < seq and added.get(name) == digest for at, added in self.added)

    def _from_run(self, used: dict[str, str]) -> jinja2.Environment:
        key = frozenset(used.items())
        if key not in self._mixed:
            self._mixed[key] = environment_from(lambda name: self._by_digest(used.get(name)))
        return self._mixed[key]

    def _by_digest(self, digest: str | None) -> bytes | None:
        if digest is None or digest not in self.ctx.blob_files:
            return None
        data = read_blob(self.ctx, digest)
        return data if digest_of(data) == digest else None

    def _stored_source(self, name: str) -> bytes | None:
        digest = self.manifest.get(name)
        if digest is None or digest not in self.ctx.blob_files:
            return None
        data = read_blob(self.ctx, digest)
        return data if digest_of(data) == digest else None

    def environment(self, used: dict[str, str]) -> jinja2.Environment | None:
        """The environment that renders a context which used ``used`` (name -> digest)."""
        if all(self.manifest.get(n) == d and d in self.ctx.blob_files for n, d in used.items()):
            return self.stored
        if self.added and all(d in self.ctx.blob_files for d in used.values()):
            # some came with a later session: each template's bytes by its own digest
            return self._from_run(used)
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
    context = {name: getattr(inputs, name) for name in type(inputs).model_fields}
    return [
        [roles.message_role(name), render_template(name, context, env)]
        for name in roles.get_role(role).templates[variant]
    ]


_LATER_TURN = re.compile(r"\.(\d+)\.(?:assistant|user)\.j2$")


def _turns(used: dict[str, str]) -> tuple[str, ...] | None:
    """The page's rule: of the templates that are not partials (last path part starting with
    ``_``), those named ``<stem>.<n>.assistant.j2`` or ``<stem>.<n>.user.j2`` are the later
    turns of a multi-turn call, in increasing ``n``; of the rest, the one ending in
    ``system.j2`` is the system message and the one ending in ``user.j2`` the first user's."""
    mains = [name for name in used if not name.rsplit("/", 1)[-1].startswith("_")]
    later = sorted(
        (int(m.group(1)), name) for name in mains if (m := _LATER_TURN.search(name)) is not None
    )
    first = [name for name in mains if _LATER_TURN.search(name) is None]
    system = [name for name in first if name.endswith("system.j2")]
    user = [name for name in first if name.endswith("user.j2")]
    if len(system) != 1 or len(user) != 1:
        return None
    if len({n for n, _ in later}) != len(later):
        return None
    return (system[0], user[0], *(name for _, name in later))


def check_prompts(ctx: AuditContext) -> list[Check]:
    rows: list[Check] = []
    templates = _Templates(ctx)
    contexts: dict[str, Record] = {}
    for rec in records_of(ctx, "context.built"):
        data = rec.data
        contexts[data["call_id"]] = rec
        used: dict[str, str] = data["templates"]
        for name, digest in used.items():
            if templates.manifest and not templates.named(name, digest, rec.seq):
                rows.append(
                    row_about(
                        ctx,
                        "prompts",
                        "fail",
                        f"{data['call_id']}: template {name} is not the one the manifest "
                        "or an earlier session names",
                        rec,
                    )
                )
        turns = _turns(used)
        if turns is None or turns != roles.get_role(data["role"]).templates.get(data["variant"]):
            rows.append(
                row_about(
                    ctx,
                    "prompts",
                    "fail",
                    f"{data['call_id']}: its templates do not name the system, user and "
                    f"later-turn templates of role {data['role']} variant {data['variant']} "
                    "(docs/format.md, Re-rendering prompts)",
                    rec,
                )
            )
            continue
        try:
            env = templates.environment(used)
        except LookupError:
            continue  # reported once below, not as a false prompt mismatch per call
        spec = roles.get_role(data["role"])
        inputs = spec.inputs_model.model_validate_json(read_blob(ctx, data["inputs"]["blob"]))
        rendered = _render(env, data["role"], data["variant"], inputs)
        recorded = json.loads(read_blob(ctx, data["messages"]["blob"]))
        if rendered != recorded:
            rows.append(
                row_about(
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
    exchanges = Exchanges()
    for rec in ctx.records:
        exchanges.fold(rec)
        if rec.type != "llm.started":
            continue
        data = rec.data
        built = contexts.get(data["call_id"])
        if built is None:
            rows.append(
                row_about(
                    ctx,
                    "prompts",
                    "fail",
                    f"{data['call_id']}: request sent without a recorded context",
                    rec,
                )
            )
            continue
        messages = _messages_from(read_blob(ctx, built.data["messages"]["blob"]))
        # a later turn of a call with tools: its earlier turns and the tools' results follow
        messages += exchanges.messages(ctx, data["call_id"], data["attempt"])
        request = request_from_params(messages, data["params"])
        expected = encode_request(data["api"], request)
        if expected != read_blob(ctx, data["request"]["blob"]):
            rows.append(
                row_about(
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
