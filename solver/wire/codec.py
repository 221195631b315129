"""One entry point over the three protocol codecs: encode a request, decode a response.

:func:`encode_request` is pure and deterministic (sorted keys, compact separators, UTF-8), so
an auditor can rebuild the exact request bytes from the recorded request parameters.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

import orjson

from solver.wire.anthropic import AnthropicDecoder, encode_anthropic
from solver.wire.chat import ChatDecoder, encode_chat
from solver.wire.events import Api, Message, Request, StreamError, StreamEvent, ToolSpec
from solver.wire.normalize import SHAPE_ERRORS, EventBuilder
from solver.wire.responses import ResponsesDecoder, encode_responses
from solver.wire.sse import SSEDecoder

__all__ = [
    "MAX_EVENT_BYTES",
    "PATHS",
    "StreamDecoder",
    "decode_body",
    "decode_stream",
    "encode_request",
    "request_from_params",
    "request_params",
    "starts_body",
]

# Path of each protocol below the endpoint's base URL (which ends in /v1 or not, see client).
PATHS: dict[str, str] = {
    "chat": "/chat/completions",
    "responses": "/responses",
    "anthropic": "/messages",
}

_Decoder = ChatDecoder | ResponsesDecoder | AnthropicDecoder

# One SSE event may hold this many bytes before its end. A server's events are deltas of a
# few hundred bytes; even a whole 256k-token answer sent as one event is a few megabytes. An
# upstream that sends more without a blank line is broken or hostile, and would otherwise
# grow the buffer until memory runs out.
MAX_EVENT_BYTES = 32 * 1024 * 1024


def _body(api: Api, request: Request) -> dict[str, Any]:
    if api == "chat":
        body = encode_chat(request)
    elif api == "responses":
        body = encode_responses(request)
    elif api == "anthropic":
        body = encode_anthropic(request)
    else:
        raise ValueError(f"unknown api {api!r}")
    for key, value in request.extra:
        body[key] = value
    return body


def encode_request(api: Api, request: Request) -> bytes:
    """The exact request body bytes for ``api``."""
    return orjson.dumps(_body(api, request), option=orjson.OPT_SORT_KEYS)


def request_params(request: Request) -> dict[str, Any]:
    """Everything of ``request`` except its messages, as JSON-able values. ``min_tokens`` is
    left out: it is the client's bound on capping, not part of the request sent."""
    return {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "stop": list(request.stop),
        "seed": request.seed,
        "reasoning": request.reasoning,
        "tools": [
            {"name": t.name, "description": t.description, "parameters": t.parameters}
            for t in request.tools
        ],
        "tool_choice": request.tool_choice,
        "stream": request.stream,
        "extra": [[key, value] for key, value in request.extra],
        "thinking_budget": request.thinking_budget,
    }


def request_from_params(messages: tuple[Message, ...], params: dict[str, Any]) -> Request:
    """The inverse of :func:`request_params`."""
    return Request(
        model=params["model"],
        messages=messages,
        max_tokens=params["max_tokens"],
        temperature=params.get("temperature"),
        top_p=params.get("top_p"),
        stop=tuple(params.get("stop") or ()),
        seed=params.get("seed"),
        reasoning=params.get("reasoning"),
        tools=tuple(
            ToolSpec(name=t["name"], description=t["description"], parameters=t["parameters"])
            for t in params.get("tools") or ()
        ),
        tool_choice=params.get("tool_choice"),
        stream=params.get("stream", True),
        extra=tuple((key, value) for key, value in params.get("extra") or ()),
        thinking_budget=params.get("thinking_budget"),
    )


def with_max_tokens(request: Request, max_tokens: int) -> Request:
    return replace(request, max_tokens=max_tokens)


class StreamDecoder:
    """Raw response bytes in, canonical events out, for one response of ``api``.

    ``feed`` takes bytes exactly as read from the network; ``close`` is the EOF. The events of
    a stream always end with exactly one :class:`Finish` or :class:`StreamError`.
    """

    __slots__ = ("_builder", "_decoder", "_overflowed", "_sse", "api", "max_event_bytes")

    def __init__(
        self, api: Api, *, reasoning: bool | None = None, max_event_bytes: int = MAX_EVENT_BYTES
    ) -> None:
        """``reasoning`` is the request's: when it is True, Chat text that may be reasoning
        whose ``<think>`` was in the prompt is held until a tag decides it, so live events are
        right; otherwise text streams at once and :func:`fold_events` splits afterwards
        (unless ``reasoning`` is False: give fold_events the same value). An event still
        unfinished past ``max_event_bytes`` ends the stream as a retryable error."""
        self.api = api
        self.max_event_bytes = max_event_bytes
        self._overflowed = False
        self._sse = SSEDecoder()
        self._builder = EventBuilder(think_tags=api == "chat", hold_orphan_think=reasoning is True)
        decoder: _Decoder
        if api == "chat":
            decoder = ChatDecoder(self._builder)
        elif api == "responses":
            decoder = ResponsesDecoder(self._builder)
        elif api == "anthropic":
            decoder = AnthropicDecoder(self._builder)
        else:
            raise ValueError(f"unknown api {api!r}")
        self._decoder = decoder

    def feed(self, data: bytes) -> list[StreamEvent]:
        if self._overflowed:
            return []  # the stream ended at the oversized event: nothing more is buffered
        builder = self._builder
        decoder = self._decoder
        for event, payload in self._sse.feed(data):
            decoder.feed(event, payload)
        if self._sse.pending > self.max_event_bytes:
            self._overflowed = True
            self._sse = SSEDecoder()  # the bytes held are let go, not decoded
            if not builder.closed:
                builder.cases.add("event_too_large")
                message = f"an SSE event ran past {self.max_event_bytes} bytes without its end"
                builder.error("malformed", message, retryable=True)
                builder.end(clean=False)
        if not builder.out:
            return []
        out, builder.out = builder.out, []
        return out

    def close(self) -> list[StreamEvent]:
        if self._overflowed:
            return self._builder.drain()
        for event, payload in self._sse.close():
            self._decoder.feed(event, payload)
        self._builder.end(clean=False)
        return self._builder.drain()

    def fail(self, kind: str, message: str, *, retryable: bool) -> list[StreamEvent]:
        """End the stream with an error the transport saw (a reset, a deadline)."""
        self._builder.error(kind, message, retryable=retryable)
        self._builder.end(clean=False)
        return self._builder.drain()

    def too_large(self, message: str) -> list[StreamEvent]:
        """End the stream because the response ran past the reader's byte limit (retryable:
        a server that does this once may not the next time)."""
        if not self._builder.closed:
            self._builder.cases.add("response_too_large")
        return self.fail("malformed", message, retryable=True)

    def body(self, data: bytes) -> list[StreamEvent]:
        """A whole non-stream JSON body (also a JSON body sent to a stream request, E20)."""
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            return self.fail("malformed", f"malformed JSON body: {exc}", retryable=True)
        if not isinstance(value, dict):
            return self.fail("malformed", "the response body is not a JSON object", retryable=True)
        try:
            self._decoder.body(value)
        except SHAPE_ERRORS as exc:
            self._builder.malformed(exc)
        return self._builder.drain()

    @property
    def server_id(self) -> str | None:
        return self._decoder.server_id

    @property
    def cases(self) -> frozenset[str]:
        return frozenset(self._builder.cases)

    @property
    def finished(self) -> bool:
        return self._builder.closed

    @property
    def finish_pending(self) -> bool:
        """A finish reason arrived but the stream has not ended yet (usage tail, ``[DONE]``)."""
        builder = self._builder
        return builder.finished and not builder.closed


def starts_body(data: bytes) -> bool | None:
    """Whether a response whose first bytes are ``data`` is one JSON body (``{`` or ``[``) or
    an SSE stream; None while only whitespace was seen. The one rule the live client and the
    offline decoders share, whatever the content-type said (E20)."""
    head = data.lstrip()
    if not head:
        return None
    return head[:1] in (b"{", b"[")


def decode_stream(
    api: Api, chunks: Iterable[bytes], *, reasoning: bool | None = None
) -> Iterator[StreamEvent]:
    """Canonical events of a recorded raw SSE response, chunk boundaries anywhere.

    A whole JSON body where a stream was asked for (E20: the client decodes such an answer as
    a body) is recognised by its first byte and decoded as a body here too. ``reasoning`` as
    for :class:`StreamDecoder`; folded with ``fold_events(..., reasoning=)`` given the same
    value, the completion is the live client's."""
    decoder = StreamDecoder(api, reasoning=reasoning)
    head: list[bytes] = []
    chunk_iter = iter(chunks)
    for chunk in chunk_iter:
        body = starts_body(chunk)
        if body is None:
            head.append(chunk)
            continue
        if body:
            yield from decoder.body(b"".join(head) + chunk + b"".join(chunk_iter))
            return
        for held in head:
            yield from decoder.feed(held)
        yield from decoder.feed(chunk)
        break
    for chunk in chunk_iter:
        yield from decoder.feed(chunk)
    yield from decoder.close()


def decode_body(api: Api, data: bytes, *, reasoning: bool | None = None) -> list[StreamEvent]:
    """Canonical events of a recorded non-stream JSON response; an SSE stream sent to a
    non-stream request (E20) is recognised and decoded as a stream. ``reasoning`` as for
    :func:`decode_stream`."""
    if starts_body(data) is False:
        return list(decode_stream(api, [data], reasoning=reasoning))
    return StreamDecoder(api, reasoning=reasoning).body(data)


def is_error(event: StreamEvent) -> bool:
    return isinstance(event, StreamError)
