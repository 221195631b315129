"""Canonical stream events -> one strictly sequential sequence of output blocks.

Every front emitter (Anthropic, Responses, Chat) renders the same block sequence, so the
catalogue rules of research/stream-edge-cases.md live here once:

- blocks are strictly sequential: open, deltas, close; a different kind closes the open block
  (E25, E34); empty payloads never open a block (E13, E14);
- tool calls are keyed by the upstream index and start only once id and name are known (E28);
  one tool streams live, parallel ones are released whole at the finish in index order (E29);
  the first non-empty id and name stick (E47);
- the finish is sticky: a second finish or anything after it only merges usage (E01-E03, E10);
- usage is a cumulative report, never a terminal (E16);
- ``stop`` with a streamed tool call means ``tool_calls`` (b.3); ``tool_calls`` with no call is
  downgraded to ``stop`` when text exists, else it is an error (E32); ``abort`` and ``error`` are
  failures, never a success (E19, E36); no finish at all is a failure (E07);
- a ``stop`` with reasoning only is promoted to text (E22).

The normaliser never invents model output: a failure is reported as such.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from solver.llm.events import (
    Finish,
    ReasoningDelta,
    ReasoningSignature,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    Usage,
)

BlockKind = Literal["thinking", "text", "tool"]
WHITESPACE_RUNAWAY = 500
EndReason = Literal["stop", "length", "tool_calls", "content_filter"]


class Block:
    """One output block. ``parts`` holds the streamed fragments (text, thinking or JSON args)."""

    __slots__ = ("index", "kind", "parts", "signature", "tool_id", "tool_name")

    def __init__(self, index: int, kind: BlockKind, tool_id: str = "", tool_name: str = "") -> None:
        self.index = index
        self.kind: BlockKind = kind
        self.parts: list[str] = []
        self.signature = ""
        self.tool_id = tool_id
        self.tool_name = tool_name

    @property
    def text(self) -> str:
        return "".join(self.parts)


@dataclass(frozen=True, slots=True)
class TurnEnd:
    reason: EndReason
    raw_reason: str
    usage: Usage
    stop_sequence: str | None = None


@dataclass(frozen=True, slots=True)
class TurnFailure:
    """Why a turn cannot end in success. ``kind`` is a short telemetry label."""

    kind: str
    message: str
    status: int | None = None
    retryable: bool = False
    retry_after: float | None = None


class TurnSink(Protocol):
    def open_block(self, block: Block) -> None: ...

    def block_delta(self, block: Block, fragment: str) -> None: ...

    def close_block(self, block: Block) -> None: ...


class _Tool:
    __slots__ = ("args", "blank_run", "block", "id", "late", "name")

    def __init__(self) -> None:
        self.blank_run = 0
        self.id = ""
        self.name = ""
        self.args: list[str] = []
        self.block: Block | None = None
        self.late = False


def merge_usage(old: Usage, new: Usage) -> Usage:
    """Usage reports are cumulative; a zero field means "not reported here", so keep the old."""
    return Usage(
        input_tokens=new.input_tokens or old.input_tokens,
        cached_tokens=new.cached_tokens or old.cached_tokens,
        output_tokens=new.output_tokens or old.output_tokens,
        reasoning_tokens=new.reasoning_tokens or old.reasoning_tokens,
    )


class TurnState:
    """Folds canonical events into blocks, calling ``sink`` as blocks open, grow and close."""

    def __init__(
        self,
        sink: TurnSink,
        tool_id_prefix: str = "call_",
        before_first_block: Callable[[], None] | None = None,
    ) -> None:
        """``before_first_block`` runs once, just before the first block opens (a stream
        opens its message there, so the message start precedes every block)."""
        self._sink = sink
        self._before_first_block = before_first_block
        self._tool_id_prefix = tool_id_prefix
        self.blocks: list[Block] = []
        self._open: Block | None = None
        self._tools: dict[int, _Tool] = {}
        self._finish: Finish | None = None
        self.failure: TurnFailure | None = None
        self.usage = Usage()
        self.cases: set[str] = set()
        self.output_started = False
        self.saw_event = False

    # ------------------------------------------------------------ feeding

    def feed(self, event: StreamEvent) -> None:
        self.saw_event = True
        if isinstance(event, TextDelta | ReasoningDelta):
            if not event.text:
                return
            if self._finish is not None or self.failure is not None:
                self.cases.add("E10_after_finish")
                return
            self._append("text" if isinstance(event, TextDelta) else "thinking", event.text)
        elif isinstance(event, ToolCallDelta):
            if self._finish is not None or self.failure is not None:
                self.cases.add("E10_after_finish")
                return
            self._tool_delta(event)
        elif isinstance(event, Usage):
            if self._finish is not None:
                self.cases.add("E01_usage_after_finish")
            self.usage = merge_usage(self.usage, event)
        elif isinstance(event, Finish):
            if self._finish is None:
                self._finish = event
            else:
                self.cases.add("E03_duplicate_finish")
        elif isinstance(event, ReasoningSignature):
            if self._open is not None and self._open.kind == "thinking":
                self._open.signature = event.signature
            else:
                self.cases.add("signature_without_thinking")
        elif isinstance(event, StreamError):
            if self.failure is None and self._finish is None:
                self.failure = TurnFailure(
                    kind=event.kind,
                    message=event.message,
                    status=event.status,
                    retryable=event.retryable,
                )
            elif self._finish is not None:
                self.cases.add("E06_error_after_finish")

    def _append(self, kind: BlockKind, text: str) -> None:
        block = self._open
        if block is None or block.kind != kind:
            if block is not None:
                self._close(block)
            block = self._new_block(kind)
        block.parts.append(text)
        self.output_started = True
        self._sink.block_delta(block, text)

    def _new_block(self, kind: BlockKind, tool_id: str = "", tool_name: str = "") -> Block:
        if not self.blocks and self._before_first_block is not None:
            self._before_first_block()
        block = Block(len(self.blocks), kind, tool_id, tool_name)
        self.blocks.append(block)
        self._open = block
        self._sink.open_block(block)
        return block

    def _close(self, block: Block) -> None:
        if block.kind == "tool" and not block.parts:
            block.parts.append("{}")  # an empty argument text is "no arguments" (E31)
            self._sink.block_delta(block, "{}")
        self._open = None
        self._sink.close_block(block)

    def _tool_delta(self, event: ToolCallDelta) -> None:
        tool = self._tools.get(event.index)
        if tool is None:
            tool = self._tools[event.index] = _Tool()
            if len(self._tools) > 1:
                self.cases.add("E29_parallel_tools")
        if event.id and not tool.id:
            tool.id = event.id
        if event.name and not tool.name:
            tool.name = event.name
        if event.arguments:
            if tool.block is None and not (tool.id and tool.name):
                self.cases.add("E28_late_tool_id")
            tool.args.append(event.arguments)
            if self._runaway(tool, event.arguments):
                return
        if tool.block is not None:
            if not event.arguments:
                return
            if tool.block is self._open:
                tool.block.parts.append(event.arguments)
                self._sink.block_delta(tool.block, event.arguments)
            else:
                tool.late = True
            return
        open_block = self._open
        if tool.id and tool.name and (open_block is None or open_block.kind != "tool"):
            if open_block is not None:
                self._close(open_block)
            self._start_tool(tool, event.index)

    def _runaway(self, tool: _Tool, fragment: str) -> bool:
        """E33: a degenerate model can emit whitespace into tool arguments until max_tokens.
        Past ``WHITESPACE_RUNAWAY`` blank characters in a row the turn fails at once, so the
        client retries instead of waiting minutes for a call it cannot use."""
        stripped = fragment.rstrip()
        if stripped:
            tool.blank_run = len(fragment) - len(stripped)
        else:
            tool.blank_run += len(fragment)
        if tool.blank_run <= WHITESPACE_RUNAWAY:
            return False
        self.cases.add("E33_whitespace_runaway")
        self.failure = TurnFailure(
            "tool_args_runaway", "the model emitted endless whitespace into tool arguments",
            retryable=True,
        )  # fmt: skip
        return True

    def _start_tool(self, tool: _Tool, upstream_index: int) -> None:
        if not tool.id:
            tool.id = f"{self._tool_id_prefix}{len(self.blocks)}_{upstream_index}"
            self.cases.add("E28_synthesized_tool_id")
        block = self._new_block("tool", tool.id, tool.name)
        tool.block = block
        self.output_started = True
        if tool.args:
            text = "".join(tool.args)
            block.parts.append(text)
            self._sink.block_delta(block, text)

    # ------------------------------------------------------------ the end

    def end(self) -> TurnEnd | TurnFailure:
        """Called once the upstream stream is over (or given up): close what is open and say
        how the turn ended. After a failure the open block is left open on purpose: the
        protocols end a failed stream with an error, not with a tidy close."""
        if self.failure is not None:
            return self.failure
        finish = self._finish
        if finish is None:
            self.failure = TurnFailure(
                "truncated",
                "upstream stream ended before a finish reason",
                retryable=not self.output_started,
            )
            self.cases.add("E07_truncated")
            return self.failure
        if finish.reason == "abort":
            self.cases.add("E19_abort")
            self.failure = TurnFailure("abort", "upstream aborted the generation", status=503)
            return self.failure
        if finish.reason == "error":
            self.failure = TurnFailure("upstream_error", finish.raw_reason or "upstream error")
            return self.failure
        named = [i for i in sorted(self._tools) if self._tools[i].name]
        if len(named) < len(self._tools):
            self.cases.add("E32_nameless_tool_dropped")
        reason: EndReason = finish.reason
        has_text = any(b.kind == "text" for b in self.blocks)
        if reason == "stop" and named:
            reason = "tool_calls"
            self.cases.add("b3_stop_with_tool")
        if reason == "tool_calls" and not named:
            if has_text:
                reason = "stop"
                self.cases.add("E32_tool_finish_downgraded")
            else:
                self.cases.add("E32_tool_call_lost")
                self.failure = TurnFailure(
                    "tool_call_lost", "upstream reported a tool call but sent none", retryable=True
                )
                return self.failure
        if reason == "stop" and not has_text and not named:
            reasoning = "".join(b.text for b in self.blocks if b.kind == "thinking")
            if reasoning:
                self.cases.add("E22_reasoning_promoted")
                self._append("text", reasoning)
        if self._open is not None:
            self._close(self._open)
        for index in named:
            tool = self._tools[index]
            if tool.block is None:
                self._start_tool(tool, index)
                assert self._open is not None
                self._close(self._open)
            if tool.late:
                self.cases.add("E29_interleaved_late_fragment")
                self.failure = TurnFailure(
                    "tool_args_interleaved", "tool call arguments arrived after the call closed"
                )
                return self.failure
        return TurnEnd(reason, finish.raw_reason, self.usage, finish.stop_sequence)
