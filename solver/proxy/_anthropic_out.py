"""Canonical blocks -> Anthropic Messages: the SSE event grammar Claude Code and the anthropic SDK
expect, the non-streamed message, and errors (research e.1 "Anthropic", b.1-b.4).

Stream grammar: ``message_start`` once and first; blocks strictly sequential; a thinking block
ends with a ``signature_delta``; exactly one ``message_delta`` after the last block, then
``message_stop`` and nothing else; on failure ``event: error`` and no ``message_stop``.
"""

from __future__ import annotations

import json
from typing import Any

from solver.llm.events import Usage

from . import _signature
from ._toolids import for_anthropic
from ._turn import Block, TurnEnd, TurnFailure
from ._wire import dumps, json_bytes, sse_event

STOP_REASON = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}

_ERROR_TYPE = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def error_type(status: int) -> str:
    if status in _ERROR_TYPE:
        return _ERROR_TYPE[status]
    return "api_error" if status < 500 or status == 500 else "overloaded_error"


def failure_status(failure: TurnFailure) -> int:
    """The HTTP status a failure is reported with before any byte went out. Retryable upstream
    trouble is 529 (Claude Code and the SDK retry it); a broken stream is a plain 502."""
    if failure.status == 429:
        return 429
    if failure.status is not None and 400 <= failure.status < 500:
        return failure.status
    return 529 if failure.retryable else 502


_BROKEN_STREAM = {
    "truncated", "eof_without_finish", "malformed", "abort", "tool_call_lost",
    "tool_args_interleaved", "runaway_arguments", "upstream_error",
}  # fmt: skip


def stream_error_type(failure: TurnFailure) -> str:
    """The ``error.type`` of an in-stream failure: a broken or truncated upstream stream is an
    ``api_error`` (E07, E19, E32); silence and overload are ``overloaded_error``, which Claude
    Code retries (E09, E37); a 4xx keeps its own type."""
    if failure.status == 429:
        return "rate_limit_error"
    if failure.kind in _BROKEN_STREAM:
        return "api_error"
    if failure.status is not None and 400 <= failure.status < 500:
        return error_type(failure.status)
    return "overloaded_error"


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type(status), "message": message}}


def anthropic_usage(usage: Usage) -> dict[str, int]:
    """b.4: Anthropic ``input_tokens`` excludes cache reads; canonical input includes them."""
    return {
        "input_tokens": max(usage.input_tokens - usage.cached_tokens, 0),
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": usage.cached_tokens,
    }


_DELTA_HEAD = {
    "text": b'{"type":"text_delta","text":',
    "thinking": b'{"type":"thinking_delta","thinking":',
    "tool": b'{"type":"input_json_delta","partial_json":',
}


def stop_fields(end: TurnEnd, stops: tuple[str, ...]) -> tuple[str, str | None]:
    """``stop_reason`` and ``stop_sequence``: a plain stop becomes ``stop_sequence`` only when
    the upstream named the string it matched and the client asked for that string (research
    b.4); an end-of-turn token the server matched on its own stays ``end_turn``."""
    if end.reason == "stop" and end.stop_sequence is not None and end.stop_sequence in stops:
        return "stop_sequence", end.stop_sequence
    return STOP_REASON[end.reason], None


def _signature_of(block: Block) -> str:
    return block.signature or _signature.mint(block.text)


class AnthropicStream:
    """Renders one turn as Anthropic SSE bytes into an internal buffer (``take``)."""

    def __init__(self, message_id: str, model: str, stops: tuple[str, ...] = ()) -> None:
        self._id = message_id
        self._model = model
        self._stops = stops
        self._out: list[bytes] = []
        self.started = False
        self.ended = False

    def take(self) -> bytes:
        data = b"".join(self._out)
        self._out.clear()
        return data

    def start(self, usage: Usage) -> None:
        message: dict[str, Any] = {
            "id": self._id,
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": anthropic_usage(usage),
        }
        self._out.append(
            sse_event("message_start", dumps({"type": "message_start", "message": message}))
        )
        self.started = True

    def keepalive(self) -> bytes:
        return b'event: ping\ndata: {"type":"ping"}\n\n'

    # TurnSink
    def open_block(self, block: Block) -> None:
        if block.kind == "text":
            content: dict[str, Any] = {"type": "text", "text": ""}
        elif block.kind == "thinking":
            content = {"type": "thinking", "thinking": "", "signature": ""}
        else:
            content = {
                "type": "tool_use",
                "id": for_anthropic(block.tool_id),
                "name": block.tool_name,
                "input": {},
            }
        payload = {"type": "content_block_start", "index": block.index, "content_block": content}
        self._out.append(sse_event("content_block_start", dumps(payload)))

    def block_delta(self, block: Block, fragment: str) -> None:
        self._out.append(
            b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
            b'"delta":%s%s}}\n\n' % (block.index, _DELTA_HEAD[block.kind], json_bytes(fragment))
        )

    def close_block(self, block: Block) -> None:
        if block.kind == "thinking":
            delta = {"type": "signature_delta", "signature": _signature_of(block)}
            payload = {"type": "content_block_delta", "index": block.index, "delta": delta}
            self._out.append(sse_event("content_block_delta", dumps(payload)))
        self._out.append(
            f'event: content_block_stop\ndata: {{"type":"content_block_stop","index":'
            f"{block.index}}}\n\n".encode()
        )

    def finish(self, end: TurnEnd) -> None:
        stop_reason, stop_sequence = stop_fields(end, self._stops)
        payload = {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
            "usage": anthropic_usage(end.usage),
        }
        self._out.append(sse_event("message_delta", dumps(payload)))
        self._out.append(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
        self.ended = True

    def fail(self, failure: TurnFailure) -> None:
        body = {"type": "error", "error": {"type": stream_error_type(failure),
                                           "message": failure.message}}  # fmt: skip
        self._out.append(sse_event("error", dumps(body)))
        self.ended = True


def render_message(
    message_id: str, model: str, blocks: list[Block], end: TurnEnd, stops: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The non-streamed ``message`` object for the same blocks."""
    content: list[dict[str, Any]] = []
    for block in blocks:
        if block.kind == "text":
            content.append({"type": "text", "text": block.text})
        elif block.kind == "thinking":
            content.append(
                {"type": "thinking", "thinking": block.text, "signature": _signature_of(block)}
            )
        else:
            content.append(
                {
                    "type": "tool_use",
                    "id": for_anthropic(block.tool_id),
                    "name": block.tool_name,
                    "input": tool_input(block.text),
                }
            )
    stop_reason, stop_sequence = stop_fields(end, stops)
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": anthropic_usage(end.usage),
    }


def tool_input(arguments: str) -> Any:
    """Parse tool arguments once at the end (research b.2); text that is not a JSON object is
    kept under ``_raw`` so nothing the model produced is lost silently."""
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        return {"_raw": arguments}
    return value if isinstance(value, dict) else {"_raw": arguments}
