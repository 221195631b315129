"""Canonical stream events -> one strictly sequential sequence of output blocks.

Every front emitter (Anthropic, Responses, Chat) renders the same block sequence. The events
come from :class:`solver.wire.StreamDecoder`, whose normaliser already guarantees one terminal
event, last (a sticky finish, usage before it, E01-E10), the ``stop``/``tool_calls`` repairs
(b3, E32), the reasoning promotion (E22), abort and error finishes as errors (E19) and the
whitespace runaway (E33); those rules are not applied twice. What is left is what only the
block view needs (codes in docs/stream-cases.md):

- blocks are strictly sequential: open, deltas, close; a different kind closes the open block
  (E25, E34); empty payloads never open a block (E13, E14);
- tool calls are keyed by the upstream index and start only once id and name are known (E28);
  one tool streams live, parallel ones are released whole at the finish in index order (E29);
  the first non-empty id and name stick (E47); a tool call that never got a name is dropped,
  and a ``tool_calls`` finish left with no named call is downgraded or fails (E32).

The turn never invents model output: a failure is reported as such.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol, cast

from solver.wire import (
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
    __slots__ = ("args", "block", "id", "late", "name")

    def __init__(self) -> None:
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

    # ------------------------------------------------------------ feeding

    def feed(self, event: StreamEvent) -> None:
        """One event of a normalised stream (nothing follows its terminal event)."""
        if isinstance(event, TextDelta | ReasoningDelta):
            if event.text:
                self._append("text" if isinstance(event, TextDelta) else "thinking", event.text)
        elif isinstance(event, ToolCallDelta):
            self._tool_delta(event)
        elif isinstance(event, Usage):
            self.usage = merge_usage(self.usage, event)
        elif isinstance(event, Finish):
            self._finish = event
        elif isinstance(event, ReasoningSignature):
            if self._open is not None and self._open.kind == "thinking":
                self._open.signature = event.signature
            else:
                self.cases.add("signature_without_thinking")
        elif isinstance(event, StreamError) and self.failure is None:
            self.failure = TurnFailure(
                kind=event.kind,
                message=event.message,
                status=event.status,
                retryable=event.retryable,
            )

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
        if finish is None:  # the decoder always ends with a terminal: a guard, not a case
            self.failure = TurnFailure(
                "truncated",
                "upstream stream ended before a finish reason",
                retryable=not self.output_started,
            )
            return self.failure
        named = [i for i in sorted(self._tools) if self._tools[i].name]
        if len(named) < len(self._tools):
            self.cases.add("E32_nameless_tool_dropped")
        # the decoder mapped abort and error finishes to errors: what is left ends a turn
        reason = cast(EndReason, finish.reason)
        if reason == "tool_calls" and not named:  # the only calls had no name (dropped)
            if any(b.kind == "text" for b in self.blocks):
                reason = "stop"
            else:
                self.failure = TurnFailure(
                    "tool_call_lost", "upstream reported a tool call but sent none", retryable=True
                )
                return self.failure
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
