"""Small helpers shared by the audit checks that read the loop's records."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from solver.audit.base import AuditContext, Check, Status
from solver.loop.tools import exchange_messages
from solver.records import ToolExecuted
from solver.store import Record
from solver.wire import Completion, Message, decode_body, decode_stream, fold_events


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def read_blob(ctx: AuditContext, digest: str) -> bytes:
    return ctx.reader.read_blob(digest)


def row_about(ctx: AuditContext, name: str, status: Status, detail: str, rec: Record) -> Check:
    """One check row about one journal record."""
    return Check(name=name, status=status, detail=detail, where=ctx.at(rec))


def records_of(ctx: AuditContext, *types: str) -> list[Record]:
    return [r for r in ctx.records if r.type in types]


def completion_of(ctx: AuditContext, started: Record, completed: Record) -> Completion:
    """The completion an attempt's recorded response folds to, decoded as it was live."""
    raw = read_blob(ctx, completed.data["response"]["blob"])
    api = started.data["api"]
    # The request's reasoning setting decides, as it did live, whether text that may be
    # reasoning whose <think> was in the prompt is held (docs/format.md, The response text).
    reasoning = started.data["params"].get("reasoning")
    if started.data["params"].get("stream", True):
        events = list(decode_stream(api, [raw], reasoning=reasoning))
    else:
        events = decode_body(api, raw, reasoning=reasoning)
    return fold_events(events, reasoning=reasoning)


@dataclass
class Exchanges:
    """The tool turns of every call so far, folded in journal order: the responses that
    asked for tools and the ``tool.executed`` records answering them, so each later
    request's messages can be rebuilt (docs/format.md, Tool executions)."""

    started: dict[tuple[str, int], Record] = field(default_factory=dict)
    completed: dict[str, list[Record]] = field(default_factory=dict)
    tools: dict[tuple[str, int], list[ToolExecuted]] = field(default_factory=dict)

    def fold(self, rec: Record) -> None:
        call = str(rec.data.get("call_id", ""))
        if rec.type == "llm.started":
            self.started[(call, rec.data["attempt"])] = rec
        elif rec.type == "llm.completed":
            self.completed.setdefault(call, []).append(rec)
        elif rec.type == "tool.executed":
            executed = ToolExecuted.model_validate(rec.data)
            self.tools.setdefault((call, executed.attempt), []).append(executed)

    def response(self, ctx: AuditContext, call: str, attempt: int) -> Completion | None:
        for rec in self.completed.get(call, []):
            if rec.data["attempt"] == attempt and (call, attempt) in self.started:
                return completion_of(ctx, self.started[(call, attempt)], rec)
        return None

    def messages(self, ctx: AuditContext, call: str, before: int) -> tuple[Message, ...]:
        """What the call's tool turns before attempt ``before`` add to its context's
        messages: each response answered by tool.executed records, with those results."""
        turns = []
        for rec in self.completed.get(call, []):
            attempt = rec.data["attempt"]
            executed = self.tools.get((call, attempt))
            if attempt >= before or not executed:
                continue
            completion = self.response(ctx, call, attempt)
            if completion is None:
                continue
            blobs = {r.content.blob: read_blob(ctx, r.content.blob) for r in executed}
            turns.append((completion, executed, blobs))
        return exchange_messages(turns)
