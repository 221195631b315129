"""Fold canonical events into one :class:`Completion`, incrementally or all at once."""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from solver.wire.events import (
    Completion,
    Finish,
    FinishReason,
    ReasoningDelta,
    ReasoningSignature,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)

__all__ = ["Folder", "clean_arguments", "fold_events", "split_orphan_think"]


def clean_arguments(arguments: str) -> str:
    """Tool arguments as sent, except: empty becomes ``{}``, and one JSON object sent twice
    back to back by a gateway keeps the first copy (E31)."""
    text = arguments.strip()
    if not text:
        return "{}"
    half = len(text) // 2
    if len(text) % 2 == 0 and text[:half] == text[half:]:
        try:
            orjson.loads(text[:half])
        except orjson.JSONDecodeError:
            return arguments
        return text[:half]
    return arguments


def split_orphan_think(text: str, reasoning: str) -> tuple[str, str]:
    """GLM with thinking on but no reasoning parser: the prompt ends in ``<think>``, so the
    answer starts inside the reasoning and only ``</think>`` shows. With no other reasoning,
    what precedes that closing tag is the reasoning (b1). The event builder does this live
    when the request asked for reasoning; here it is done for streams decoded without that
    hold, so a completion is the same whichever way its events were produced. Not when the
    request turned reasoning off: the template then closed ``<think></think>`` itself, and a
    ``</think>`` in the answer is the answer's."""
    if reasoning or "</think>" not in text:
        return text, reasoning
    head, _, tail = text.partition("</think>")
    if "<think>" in head:
        return text, reasoning
    return tail, head


class _Call:
    __slots__ = ("id", "name", "parts")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.parts: list[str] = []


class Folder:
    """Accumulates events; :meth:`completion` gives the result so far."""

    __slots__ = (
        "_calls",
        "_reasoning",
        "_signature",
        "_split",
        "_text",
        "error",
        "finish",
        "usage",
    )

    def __init__(self, *, reasoning: bool | None = None) -> None:
        """``reasoning`` is the request's: False keeps a lone ``</think>`` as text."""
        self._split = reasoning is not False
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._signature = ""
        self._calls: dict[int, _Call] = {}
        self.usage = Usage()
        self.finish: Finish | None = None
        self.error: StreamError | None = None

    def add(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self._text.append(event.text)
        elif isinstance(event, ReasoningDelta):
            self._reasoning.append(event.text)
        elif isinstance(event, ToolCallDelta):
            call = self._calls.get(event.index)
            if call is None:
                call = self._calls[event.index] = _Call()
            if event.id and not call.id:
                call.id = event.id
            if event.name and not call.name:
                call.name = event.name
            if event.arguments:
                call.parts.append(event.arguments)
        elif isinstance(event, Usage):
            self.usage = event
        elif isinstance(event, Finish):
            self.finish = event
        elif isinstance(event, StreamError):
            self.error = event
        elif isinstance(event, ReasoningSignature):
            self._signature += event.signature

    @property
    def text(self) -> str:
        return "".join(self._text)

    def completion(self) -> Completion:
        calls = []
        for index in sorted(self._calls):
            call = self._calls[index]
            calls.append(
                ToolCall(
                    id=call.id or f"call_{index}",
                    name=call.name or "",
                    arguments=clean_arguments("".join(call.parts)),
                )
            )
        reason: FinishReason
        if self.error is not None:
            reason = "abort" if self.error.kind == "abort" else "error"
            raw = self.error.kind
        elif self.finish is not None:
            reason, raw = self.finish.reason, self.finish.raw_reason
        else:
            reason, raw = "error", "no_finish"
        text, reasoning = "".join(self._text), "".join(self._reasoning)
        if self._split:
            text, reasoning = split_orphan_think(text, reasoning)
        return Completion(
            text=text,
            reasoning=reasoning,
            tool_calls=tuple(calls),
            usage=self.usage,
            finish_reason=reason,
            raw_finish_reason=raw,
            reasoning_signature=self._signature,
        )


def fold_events(events: Iterable[StreamEvent], *, reasoning: bool | None = None) -> Completion:
    """The :class:`Completion` of a whole event stream. A stream that ended in a
    :class:`StreamError` folds to ``finish_reason`` ``error`` (or ``abort``) with the error
    kind as ``raw_finish_reason``; one without any terminal folds to ``error``/``no_finish``.
    ``reasoning`` is the request's (recorded in its params), as for :class:`Folder`."""
    folder = Folder(reasoning=reasoning)
    for event in events:
        folder.add(event)
    return folder.completion()
