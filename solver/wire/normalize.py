"""Turn what real servers send into correct canonical events (codes: docs/stream-cases.md).

:class:`EventBuilder` holds the invariants every protocol decoder relies on:

- deltas come out in native order (reasoning, text, tool) and empty ones never (E11, E13, E14);
- the finish is sticky: the first one wins, later ones only contribute usage (E02, E03, E10);
- usage is a report, never a terminal: the latest value is emitted once, just before the
  terminal event (E01, E16);
- exactly one terminal event ends every stream, last: :class:`Finish` or :class:`StreamError`;
  an EOF without a finish is an error, never a silent success (E07); ``[DONE]`` without a finish
  synthesises one (E08); ``abort``/``cancelled`` (E19) and ``error`` finishes are errors;
- ``stop`` after a streamed tool call means ``tool_calls``; ``tool_calls`` with no tool delta
  is downgraded to ``stop`` when text exists and is an error otherwise (E32);
- a ``stop`` with no text and no tool but with reasoning promotes the reasoning to text (E22);
- a leading inline ``<think>`` tag in text, split anywhere across chunks, makes reasoning, and
  so does text before a lone ``</think>`` (the opening tag was in the prompt), as long as no
  reasoning channel was seen (b1); until that is decidable the text is held.

Each quirk met is counted in :attr:`EventBuilder.cases` by its catalogue code, so a run can say
how often the server needed normalising.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from solver.wire.events import (
    Finish,
    FinishReason,
    ReasoningDelta,
    ReasoningSignature,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from solver.wire.sse import loads_payload

__all__ = ["SHAPE_ERRORS", "EventBuilder", "as_int", "map_finish_reason"]


def as_int(value: Any) -> int:
    """A usage count as sent, or 0 for anything that is not an integer."""
    return value if isinstance(value, int) else 0


# What a JSON value of an unexpected shape raises inside a decoder (a list where an object was
# expected, a number where a string was): the stream is malformed, never a crash.
SHAPE_ERRORS = (AttributeError, TypeError, ValueError, KeyError, IndexError)

# A tool call whose arguments run on as whitespace this long is degenerate output (E33): end the
# stream as an error instead of streaming blanks until max_tokens.
RUNAWAY_WHITESPACE = 500

_OPEN_TAG = "<think>"
_CLOSE_TAG = "</think>"

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "eos": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "length": "length",
    "max_tokens": "length",
    "max_output_tokens": "length",
    # Anthropic paused a long turn: the answer is unfinished and is continued by sending it
    # back, as after a length cut; never a plain stop (the raw reason stays on the finish)
    "pause_turn": "length",
    "model_context_window_exceeded": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
    "refusal": "content_filter",
    "abort": "abort",
    "cancelled": "abort",
    "error": "error",
}


def map_finish_reason(raw: str) -> FinishReason:
    """A protocol's finish/stop reason as a canonical one; unknown reasons end normally."""
    return _FINISH_REASONS.get(raw, "stop")


def _partial_tag_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0


class EventBuilder:
    """Collects canonical events for one stream; decoders call it, callers drain ``out``."""

    def __init__(self, *, think_tags: bool = False, hold_orphan_think: bool = False) -> None:
        self.out: list[StreamEvent] = []
        self.cases: set[str] = set()
        self.closed = False
        # inline <think> tags (b1), only while no reasoning channel was seen: "start" until the
        # first text decides; "inside" a leading <think>; "orphan" while text may be reasoning
        # whose <think> was in the prompt (held until </think>, <think>, a tool or the end);
        # "plain" once decided, and from the start when tags are not looked for. Text is held
        # as a possible orphan only when the request asked for reasoning (GLM's template then
        # ends the prompt in <think>): holding every plain answer would stop it streaming.
        # Without the hold, fold_events still splits at a lone </think> afterwards.
        self._think = "start" if think_tags else "plain"
        self._hold_orphan = hold_orphan_think
        self._tag_hold = ""  # whitespace or part of a tag, not yet decidable
        self._held: list[str] = []  # "orphan" text
        self._held_tail = ""  # its last characters, where a tag may straddle two chunks
        self._finish: Finish | None = None
        self._error: StreamError | None = None
        self._usage: Usage | None = None
        self._saw_text = False
        self._saw_tool = False
        self._reasoning_held: list[str] | None = []
        self._blank_run: dict[int, int] = {}

    # ------------------------------------------------------------ deltas

    def reasoning(self, text: str) -> None:
        """Reasoning from the protocol's own channel."""
        if type(text) is not str:
            raise TypeError(f"reasoning delta is {type(text).__name__}, not a string")
        if self._finish is not None or self.closed:
            self.cases.add("E10_after_finish")
            return
        if self._think != "plain":
            # a real reasoning channel: tags in the text are text from now on
            self._flush_tag_hold()
            self._think = "plain"
        self._reasoning(text)

    def _reasoning(self, text: str) -> None:
        if self._reasoning_held is not None:
            self._reasoning_held.append(text)
        self.out.append(ReasoningDelta(text))

    def signature(self, signature: str) -> None:
        if not self.closed and signature:
            self.out.append(ReasoningSignature(str(signature)))

    def text(self, text: str) -> None:
        if type(text) is not str:
            raise TypeError(f"text delta is {type(text).__name__}, not a string")
        if self._finish is not None or self.closed:
            self.cases.add("E10_after_finish")
            return
        if self._think != "plain":
            self._think_text(text)
            return
        self._text(text)

    def _text(self, text: str) -> None:
        self._saw_text = True
        self._reasoning_held = None
        self.out.append(TextDelta(text))

    def _think_text(self, text: str) -> None:
        if self._think == "start":
            text, self._tag_hold = self._tag_hold + text, ""
            lead = text.lstrip()
            if not lead or (len(lead) < len(_OPEN_TAG) and _OPEN_TAG.startswith(lead)):
                self._tag_hold = text  # blank, or part of a leading <think>: wait
                return
            if lead.startswith(_OPEN_TAG):
                self.cases.add("think_tags")
                self._think = "inside"
                text = lead[len(_OPEN_TAG) :]
            else:
                self._think = "orphan" if self._hold_orphan else "plain"
                if self._think == "plain":
                    self._text(text)
                    return
        if self._think == "inside":
            text, self._tag_hold = self._tag_hold + text, ""
            at = text.find(_CLOSE_TAG)
            if at < 0:
                keep = _partial_tag_suffix(text, _CLOSE_TAG)
                if keep:
                    text, self._tag_hold = text[:-keep], text[-keep:]
                if text:
                    self._reasoning(text)
                return
            self._think = "plain"
            if at:
                self._reasoning(text[:at])
            if text[at + len(_CLOSE_TAG) :]:
                self._text(text[at + len(_CLOSE_TAG) :])
            return
        # orphan: only the chunk and the tail before it are searched, never the whole hold
        window = self._held_tail + text
        self._held.append(text)
        if _CLOSE_TAG not in window and _OPEN_TAG not in window:
            self._held_tail = window[-(len(_CLOSE_TAG) - 1) :]
            return
        held = "".join(self._held)
        self._held, self._held_tail, self._think = [], "", "plain"
        head, tag, tail = held.partition(_CLOSE_TAG)
        if tag and _OPEN_TAG not in head:
            self.cases.add("think_orphan_close")
            if head:
                self._reasoning(head)
            if tail:
                self._text(tail)
        else:
            self._text(held)

    def tool(self, index: int, id: str | None, name: str | None, arguments: str) -> None:
        if self._finish is not None or self.closed:
            self.cases.add("E10_after_finish")
            return
        self._flush_tag_hold()
        if type(arguments) is not str:
            raise TypeError(f"tool arguments are {type(arguments).__name__}, not a string")
        self._saw_tool = True
        self._reasoning_held = None
        if arguments and arguments.isspace():
            run = self._blank_run[index] = self._blank_run.get(index, 0) + len(arguments)
            if run > RUNAWAY_WHITESPACE:
                self.cases.add("E33_runaway_arguments")
                message = f"tool call {index}: over {RUNAWAY_WHITESPACE} blank argument characters"
                self.error("runaway_arguments", message, retryable=True)
                self.end(clean=False)
                return
        elif arguments:
            self._blank_run[index] = 0
        self.out.append(
            ToolCallDelta(
                index=index,
                id=None if id is None else str(id),
                name=None if name is None else str(name),
                arguments=arguments,
            )
        )

    def dispatch(self, data: bytes, handle: Callable[[dict[str, Any]], None]) -> None:
        """Decode one SSE data payload and hand each JSON object in it to ``handle``; bad
        JSON or a value of the wrong shape ends the stream as malformed (every codec's feed)."""
        try:
            values = loads_payload(data)
        except ValueError as exc:
            self.error("malformed", f"malformed JSON in stream: {exc}", retryable=True)
            self.end(clean=False)
            return
        for value in values:
            try:
                if isinstance(value, dict):
                    handle(value)
            except SHAPE_ERRORS as exc:
                self.malformed(exc)
                return

    def malformed(self, exc: BaseException) -> None:
        """A value of the wrong shape: the stream ends as malformed (retryable)."""
        self.error("malformed", f"unexpected shape in stream: {exc!r}", retryable=True)
        self.end(clean=False)

    def usage(self, usage: Usage) -> None:
        if not self.closed:
            self._usage = usage

    # ------------------------------------------------------------ terminals

    def finish(self, raw: str, stop_sequence: object = None) -> None:
        """A finish reason arrived; held until :meth:`end` so the usage tail can follow.
        ``stop_sequence`` is kept only when it is a string (SGLang also reports token ids)."""
        if self.closed:
            return
        if self._finish is not None:
            self.cases.add("E03_duplicate_finish")
            return
        self._flush_tag_hold()
        matched = stop_sequence if isinstance(stop_sequence, str) and stop_sequence else None
        self._finish = Finish(map_finish_reason(raw), raw, matched)

    def error(self, kind: str, message: str, *, retryable: bool, status: int | None = None) -> None:
        """An error inside the stream: the stream's terminal, whatever comes after it."""
        if self.closed or self._error is not None:
            return
        self._error = StreamError(kind=kind, message=message, retryable=retryable, status=status)

    def end(self, *, clean: bool) -> None:
        """The stream is over. ``clean`` is true for a protocol terminal (``[DONE]``,
        ``message_stop``, ``response.completed``) and false for a bare EOF."""
        if self.closed:
            return
        self.closed = True
        self._flush_tag_hold()
        if self._usage is not None:
            self.out.append(self._usage)
        if self._error is not None:
            self.out.append(self._error)
            return
        finish = self._finish
        if finish is None:
            if not clean:
                self.cases.add("E07_eof_without_finish")
                self.out.append(
                    StreamError(
                        kind="eof_without_finish",
                        message="the stream ended before a finish reason",
                        retryable=True,
                    )
                )
                return
            self.cases.add("E08_done_without_finish")
            finish = Finish("tool_calls" if self._saw_tool else "stop", "")
        elif not clean:
            self.cases.add("E06_eof_after_finish")
        self.out.extend(self._final(finish))

    def _final(self, finish: Finish) -> list[StreamEvent]:
        reason = finish.reason
        if reason == "error":
            # finish_reason "error": the server failed the generation; never a success
            self.cases.add("finish_error")
            message = f"the server ended the stream with finish_reason {finish.raw_reason!r}"
            return [StreamError(kind="server_error", message=message, retryable=True)]
        if reason == "abort":
            self.cases.add("E19_abort")
            message = "the server aborted the request (finish_reason abort)"
            return [StreamError(kind="abort", message=message, retryable=True)]
        if reason == "stop" and self._saw_tool:
            self.cases.add("b3_stop_with_tool")
            return [Finish("tool_calls", finish.raw_reason)]
        if reason == "tool_calls" and not self._saw_tool:
            self.cases.add("E32_tool_call_lost")
            if self._saw_text:
                return [Finish("stop", finish.raw_reason)]
            message = "finish_reason tool_calls but no tool call was streamed (parser dropped it)"
            return [StreamError(kind="tool_call_lost", message=message, retryable=True)]
        held = self._reasoning_held
        if reason == "stop" and not self._saw_text and held:
            self.cases.add("E22_reasoning_promoted")
            joined = "".join(held)
            if "<tool_call>" in joined:
                self.cases.add("E24_parser_leak")
            return [TextDelta(joined), finish]
        return [finish]

    def _flush_tag_hold(self) -> None:
        """Something other than text came (a tool, a finish, the end): decide what is held."""
        state = self._think
        if state == "plain":
            return
        if state == "inside":
            hold, self._tag_hold = self._tag_hold, ""
            if hold:
                self._reasoning(hold)
            return
        # nothing showed the held text to be reasoning: it is text
        held = self._tag_hold + "".join(self._held)
        self._tag_hold, self._held, self._held_tail, self._think = "", [], "", "plain"
        if held:
            self._text(held)

    @property
    def finished(self) -> bool:
        return self._finish is not None or self._error is not None

    def drain(self) -> list[StreamEvent]:
        out, self.out = self.out, []
        return out
