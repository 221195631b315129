"""The tools a role's calls may be offered (``roles.<role>.tools``), today one: ``python``,
code the model writes, run in the sandbox (solver.sandbox).

A call with tools is an exchange inside one call: the model answers with tool calls, each is
run (or refused) and recorded as a ``tool.executed`` record, and the model is asked again
with its answer and the results appended, until it answers without tool calls. The messages
of every later turn are rebuilt from the journal alone (:func:`exchange_messages`): the engine
does it to resume an exchange, the audit to re-produce each request byte for byte."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from solver.config import Sandbox
from solver.records import ToolExecuted
from solver.sandbox import Execution, Limits, SandboxVersion, run_python, sandbox_version
from solver.store import canonical_json
from solver.wire import Completion, Message, TextPart, ToolCallPart, ToolResultPart, ToolSpec

PYTHON = "python"
TOOL_NAMES = (PYTHON,)
# A program a model writes to check a claim is short; a longer one is refused unrun.
MAX_CODE_BYTES = 64 * 1024
PYTHON_SPEC = ToolSpec(
    name=PYTHON,
    description=(
        "Run a Python 3 program and get its stdout, stderr and exit status. sympy is "
        "installed; there is no network and nothing persists between runs. The program runs "
        "under CPU, memory and wall-time limits; print what you want to see."
    ),
    parameters={
        "type": "object",
        "properties": {"code": {"type": "string", "description": "the whole program"}},
        "required": ["code"],
        "additionalProperties": False,
    },
)
SPECS: dict[str, ToolSpec] = {PYTHON: PYTHON_SPEC}


@dataclass(frozen=True)
class ToolOutcome:
    """One tool call, run or refused, before it is recorded."""

    status: Literal["ran", "refused"]
    content: str  # the tool result the model is given
    is_error: bool
    code: str | None = None
    execution: Execution | None = None


@dataclass(frozen=True)
class ToolBox:
    """The tools of each role (settings role names: verifier, checker, ...), the limit of tool
    calls in one role call, and the sandbox they run in."""

    role_tools: Mapping[str, tuple[str, ...]]
    max_calls: Mapping[str, int]
    limits: Limits = field(default_factory=Limits)
    bwrap: str = "bwrap"
    python: str = "/usr/bin/python3"
    uid: int = 65534

    @property
    def used(self) -> bool:
        return any(self.role_tools.values())

    def specs(self, role: str) -> tuple[ToolSpec, ...]:
        return tuple(SPECS[name] for name in self.role_tools.get(role, ()))

    def limit(self, role: str) -> int:
        return self.max_calls.get(role, 0)

    def check(self) -> SandboxVersion:
        """Raises SandboxUnavailable when a role has tools and the sandbox cannot start."""
        return sandbox_version(self.bwrap, self.python, self.uid)

    async def run(self, name: str, arguments: str, allowed: tuple[str, ...]) -> ToolOutcome:
        """Run one tool call (or refuse it: a tool the role was not offered, bad arguments).
        Cancelling the caller kills the sandbox within a tenth of a second."""
        if name not in allowed:
            return refused(f"no tool named {name!r} here; the tools are {', '.join(allowed)}")
        code = python_code(arguments)
        if code is None:
            return refused(
                "the arguments must be a JSON object whose `code` is the program, at most "
                f"{MAX_CODE_BYTES} bytes"
            )
        cancel = threading.Event()
        running = asyncio.ensure_future(
            asyncio.to_thread(
                run_python,
                code,
                self.limits,
                bwrap=self.bwrap,
                python=self.python,
                uid=self.uid,
                cancel=cancel,
            )
        )
        try:
            execution = await asyncio.shield(running)
        except asyncio.CancelledError:
            cancel.set()
            await asyncio.gather(running, return_exceptions=True)
            raise
        return ToolOutcome(
            status="ran",
            content=result_content(execution.as_json()),
            is_error=False,
            code=code,
            execution=execution,
        )


def sandbox_limits(sandbox: Sandbox) -> Limits:
    """The limits of one execution, from the [sandbox] settings."""
    return Limits(
        cpu_s=sandbox.cpu_s,
        wall_s=sandbox.wall_s,
        memory_mb=sandbox.memory_mb,
        file_mb=sandbox.file_mb,
        tmp_mb=sandbox.tmp_mb,
        processes=sandbox.processes,
        output_bytes=sandbox.output_bytes,
    )


def refused(reason: str) -> ToolOutcome:
    return ToolOutcome(status="refused", content=refusal_content(reason), is_error=True)


def python_code(arguments: str) -> str | None:
    """The program of a python tool call's arguments, or None when they are not a JSON object
    with a string ``code`` of at most MAX_CODE_BYTES."""
    if len(arguments) > 4 * MAX_CODE_BYTES:
        return None
    try:
        parsed = json.loads(arguments)
    except (ValueError, RecursionError):
        return None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("code"), str):
        return None
    code: str = parsed["code"]
    if len(code.encode("utf-8", errors="surrogatepass")) > MAX_CODE_BYTES:
        return None
    try:
        code.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape: no program text
        return None
    return code


# What the model is shown of an execution: its output and how it ended, not the limits.
SHOWN_FIELDS = ("exit", "timed_out", "killed_reason", "stdout", "stderr")


def result_content(record: Mapping[str, Any]) -> str:
    """The tool result text for an execution's record (``Execution.as_json()``)."""
    return canonical_json({name: record[name] for name in SHOWN_FIELDS}).decode("utf-8")


def refusal_content(reason: str) -> str:
    return canonical_json({"error": reason}).decode("utf-8")


def execution_bytes(execution: Execution) -> bytes:
    """The ``result`` blob of a ``tool.executed`` record."""
    return canonical_json(execution.as_json())


def turn_messages(
    completion: Completion, results: Sequence[tuple[str, str, bool]]
) -> tuple[Message, Message]:
    """The assistant's turn that asked for tools (its text and tool calls) and the tool
    results given back, (tool_call_id, content, is_error) in the calls' order."""
    parts: list[TextPart | ToolCallPart] = []
    if completion.text:
        parts.append(TextPart(completion.text))
    parts.extend(
        ToolCallPart(id=call.id, name=call.name, arguments=call.arguments)
        for call in completion.tool_calls
    )
    answer = Message(role="assistant", parts=tuple(parts))
    given = Message(
        role="tool",
        parts=tuple(
            ToolResultPart(tool_call_id=call_id, content=content, is_error=error)
            for call_id, content, error in results
        ),
    )
    return answer, given


def tool_turn(completion: Completion, tools_offered: bool) -> bool:
    """Whether a response is a turn that asks for tools (not the call's answer)."""
    return tools_offered and bool(completion.tool_calls)


def exchange_messages(
    turns: Sequence[tuple[Completion, Sequence[ToolExecuted], Mapping[str, bytes]]],
) -> tuple[Message, ...]:
    """The messages a call's earlier tool turns add after its context's: for each, the
    response that asked (decoded) and its ``tool.executed`` records with their ``content``
    blobs (digest -> bytes)."""
    out: list[Message] = []
    for completion, executed, blobs in turns:
        ordered = sorted(executed, key=lambda r: r.index)
        results = [
            (r.tool_call_id, blobs[r.content.blob].decode("utf-8"), r.is_error) for r in ordered
        ]
        out.extend(turn_messages(completion, results))
    return tuple(out)
