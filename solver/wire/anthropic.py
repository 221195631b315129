"""Anthropic Messages: request encoding and stream/body decoding.

Usage (b4): Anthropic's ``input_tokens`` excludes cache reads and writes, so the canonical
input is ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``; the
``message_delta`` usage is cumulative and may repeat the input fields. ``pause_turn`` (an
unfinished turn, continued by sending it back) maps to ``length``, never to a plain stop; the
raw reason stays on the finish.
"""

from __future__ import annotations

from typing import Any

import orjson

from solver.wire.errors import UnsupportedRequest
from solver.wire.events import (
    ImagePart,
    Message,
    Request,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from solver.wire.normalize import EventBuilder

__all__ = ["ANTHROPIC_VERSION", "AnthropicDecoder", "encode_anthropic"]

ANTHROPIC_VERSION = "2023-06-01"
_TOOL_CHOICE = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}
_RETRYABLE_ERRORS = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}


def _block(part: Any) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text} if part.text else None
    if isinstance(part, ImagePart):
        if part.url:
            return {"type": "image", "source": {"type": "url", "url": part.url}}
        source = {"type": "base64", "media_type": part.media_type, "data": part.data}
        return {"type": "image", "source": source}
    if isinstance(part, ThinkingPart):
        if not part.signature:
            return None  # unsigned thinking is rejected on replay (E27)
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    if isinstance(part, ToolCallPart):
        try:
            arguments = orjson.loads(part.arguments) if part.arguments.strip() else {}
        except orjson.JSONDecodeError:
            raise UnsupportedRequest(
                f"tool call {part.id}: arguments are not JSON, Anthropic needs an object"
            ) from None
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": arguments}
    if isinstance(part, ToolResultPart):
        return {
            "type": "tool_result",
            "tool_use_id": part.tool_call_id,
            "content": part.content,
            "is_error": part.is_error,
        }
    return None


def _messages(messages: tuple[Message, ...]) -> tuple[str, list[dict[str, Any]]]:
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system" and not out:
            system.append(message.plain_text())
            continue
        if message.role == "system":
            # later system messages stay in place (the mid-conversation-system beta)
            text = {"type": "text", "text": message.plain_text()}
            out.append({"role": "system", "content": [text]})
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = [b for b in (_block(p) for p in message.parts) if b is not None]
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)  # tool results of parallel calls share one turn
        else:
            out.append({"role": role, "content": blocks})
    return "\n\n".join(system), out


def encode_anthropic(request: Request) -> dict[str, Any]:
    if request.seed is not None:
        raise UnsupportedRequest("Anthropic Messages has no seed parameter")
    system, messages = _messages(request.messages)
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": messages,
        "stream": request.stream,
    }
    if system:
        body["system"] = system
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.stop:
        body["stop_sequences"] = list(request.stop)
    if request.reasoning is True:
        budget = max(1024, request.max_tokens * 3 // 4)
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    elif request.reasoning is False:
        body["thinking"] = {"type": "disabled"}
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
    if request.tool_choice is not None:
        body["tool_choice"] = _TOOL_CHOICE[request.tool_choice]
    return body


class AnthropicDecoder:
    def __init__(self, builder: EventBuilder) -> None:
        self.builder = builder
        self.server_id: str | None = None
        self._usage: dict[str, int] = {}
        self._block_kind: dict[int, str] = {}
        self._tool_index: dict[int, int] = {}

    def _merge_usage(self, raw: dict[str, Any] | None) -> None:
        if not raw:
            return
        for key in (
            "input_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
            "output_tokens",
        ):
            value = raw.get(key)
            if isinstance(value, int):
                self._usage[key] = value
        u = self._usage
        cached = u.get("cache_read_input_tokens", 0)
        total_in = u.get("input_tokens", 0) + cached + u.get("cache_creation_input_tokens", 0)
        self.builder.usage(
            Usage(
                input_tokens=total_in, cached_tokens=cached, output_tokens=u.get("output_tokens", 0)
            )
        )

    def feed(self, event: str | None, data: bytes) -> None:
        if self.builder.closed:
            return
        self.builder.dispatch(data, self.event)

    def event(self, value: dict[str, Any]) -> None:
        builder = self.builder
        kind = value.get("type")
        if kind == "content_block_delta":
            delta = value.get("delta") or {}
            delta_kind = delta.get("type")
            index = value.get("index", 0)
            if delta_kind == "text_delta":
                if delta.get("text"):
                    builder.text(delta["text"])
            elif delta_kind == "thinking_delta":
                if delta.get("thinking"):
                    builder.reasoning(delta["thinking"])
            elif delta_kind == "input_json_delta":
                if delta.get("partial_json"):
                    builder.tool(self._tool_index.get(index, 0), None, None, delta["partial_json"])
            elif delta_kind == "signature_delta":
                builder.signature(str(delta.get("signature") or ""))
        elif kind == "content_block_start":
            self._start_block(value.get("index", 0), value.get("content_block") or {})
        elif kind == "message_start":
            message = value.get("message") or {}
            if isinstance(message.get("id"), str):
                self.server_id = message["id"]
            self._merge_usage(message.get("usage"))
        elif kind == "message_delta":
            self._merge_usage(value.get("usage"))
            delta = value.get("delta") or {}
            stop = delta.get("stop_reason")
            if stop:
                builder.finish(stop, delta.get("stop_sequence"))
        elif kind == "message_stop":
            builder.end(clean=True)
        elif kind == "error":
            error = value.get("error") or {}
            error_type = str(error.get("type") or "api_error")
            builder.cases.add("E37_error_event")
            status = 529 if error_type == "overloaded_error" else None
            builder.error(
                error_type,
                str(error.get("message") or error_type),
                retryable=error_type in _RETRYABLE_ERRORS,
                status=status,
            )
            builder.end(clean=True)

    def _start_block(self, index: int, block: dict[str, Any]) -> None:
        kind = str(block.get("type"))
        self._block_kind[index] = kind
        if kind == "tool_use":
            tool = self._tool_index[index] = len(self._tool_index)
            given = block.get("input")
            arguments = orjson.dumps(given).decode() if given else ""
            self.builder.tool(tool, block.get("id") or None, block.get("name") or None, arguments)
        elif kind == "text" and block.get("text"):
            self.builder.text(block["text"])
        elif kind == "thinking":
            if block.get("thinking"):
                self.builder.reasoning(block["thinking"])
            if block.get("signature"):
                self.builder.signature(block["signature"])

    def body(self, body: dict[str, Any]) -> None:
        if body.get("type") == "error":
            self.event(body)
            return
        if isinstance(body.get("id"), str):
            self.server_id = body["id"]
        for index, block in enumerate(body.get("content") or []):
            if isinstance(block, dict):
                self._start_block(index, block)
        self._merge_usage(body.get("usage"))
        stop = body.get("stop_reason")
        if stop:
            self.builder.finish(stop, body.get("stop_sequence"))
        self.builder.end(clean=True)
