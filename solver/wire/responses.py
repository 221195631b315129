"""OpenAI Responses: request encoding and stream/body decoding.

The Responses API has no ``stop`` or ``seed``; a request that needs them is refused with
:class:`UnsupportedRequest` instead of being silently weakened. ``reasoning`` True/False maps to
``reasoning.effort`` high/minimal (advisory for GLM). Earlier assistant thinking is not sent
back: reasoning items need provider-issued ids. Usage (b4): ``input_tokens`` includes cached.

Streams end on ``response.completed`` / ``response.incomplete`` / ``response.failed``; there is
no ``[DONE]``. When a server streams no item deltas but lists the items in the terminal
response (E46), the items are taken from there.
"""

from __future__ import annotations

from typing import Any

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
from solver.wire.normalize import EventBuilder, as_int

__all__ = ["ResponsesDecoder", "encode_responses", "usage_from_responses"]


def _input(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for message in messages:
        content: list[dict[str, Any]] = []
        out_text = message.role == "assistant"
        for part in message.parts:
            if isinstance(part, TextPart):
                kind = "output_text" if out_text else "input_text"
                content.append({"type": kind, "text": part.text})
            elif isinstance(part, ImagePart):
                url = part.url or f"data:{part.media_type};base64,{part.data}"
                content.append({"type": "input_image", "image_url": url})
            elif isinstance(part, ToolCallPart):
                items.append(
                    {
                        "type": "function_call",
                        "call_id": part.id,
                        "name": part.name,
                        "arguments": part.arguments,
                    }
                )
            elif isinstance(part, ToolResultPart):
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": part.tool_call_id,
                        "output": part.content,
                    }
                )
            elif isinstance(part, ThinkingPart):
                continue
        if content:
            role = "user" if message.role == "tool" else message.role
            items.append({"type": "message", "role": role, "content": content})
    return items


def encode_responses(request: Request) -> dict[str, Any]:
    if request.stop:
        raise UnsupportedRequest("OpenAI Responses has no stop sequences")
    if request.seed is not None:
        raise UnsupportedRequest("OpenAI Responses has no seed parameter")
    body: dict[str, Any] = {
        "model": request.model,
        "input": _input(request.messages),
        "max_output_tokens": request.max_tokens,
        "stream": request.stream,
        "store": False,
    }
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.reasoning is not None:
        body["reasoning"] = {"effort": "high" if request.reasoning else "minimal"}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
            }
            for t in request.tools
        ]
    if request.tool_choice is not None:
        body["tool_choice"] = request.tool_choice
    return body


def usage_from_responses(raw: dict[str, Any]) -> Usage:
    input_details = raw.get("input_tokens_details") or {}
    output_details = raw.get("output_tokens_details") or {}
    return Usage(
        input_tokens=as_int(raw.get("input_tokens")),
        cached_tokens=as_int(input_details.get("cached_tokens")),
        output_tokens=as_int(raw.get("output_tokens")),
        reasoning_tokens=as_int(output_details.get("reasoning_tokens")),
    )


class ResponsesDecoder:
    def __init__(self, builder: EventBuilder) -> None:
        self.builder = builder
        self.server_id: str | None = None
        self._tool_by_item: dict[str, int] = {}
        self._tool_args_seen: set[int] = set()
        self._streamed = False

    def feed(self, event: str | None, data: bytes) -> None:
        if self.builder.closed:
            return
        if data == b"[DONE]":
            self.builder.end(clean=True)
            return
        self.builder.dispatch(data, self.event)

    def event(self, value: dict[str, Any]) -> None:
        builder = self.builder
        kind = value.get("type")
        if kind == "response.output_text.delta":
            self._streamed = True
            if value.get("delta"):
                builder.text(str(value["delta"]))
        elif kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
            self._streamed = True
            if value.get("delta"):
                builder.reasoning(str(value["delta"]))
        elif kind == "response.function_call_arguments.delta":
            index = self._tool_by_item.get(str(value.get("item_id")))
            if index is not None and value.get("delta"):
                self._tool_args_seen.add(index)
                builder.tool(index, None, None, str(value["delta"]))
        elif kind == "response.function_call_arguments.done":
            index = self._tool_by_item.get(str(value.get("item_id")))
            if index is not None and index not in self._tool_args_seen and value.get("arguments"):
                self._tool_args_seen.add(index)
                builder.tool(index, None, None, str(value["arguments"]))
        elif kind == "response.output_item.added":
            item = value.get("item") or {}
            if item.get("type") == "function_call":
                self._streamed = True
                self._function_call(item)
        elif kind == "response.created":
            response = value.get("response") or {}
            if isinstance(response.get("id"), str):
                self.server_id = response["id"]
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self._terminal(value.get("response") or {})
        elif kind == "error":
            message = str(value.get("message") or value.get("code") or "error in stream")
            builder.cases.add("E36_error_in_stream")
            builder.error("server_error", message, retryable=True)
            builder.end(clean=True)

    def _function_call(self, item: dict[str, Any]) -> int:
        item_id = str(item.get("id") or item.get("call_id") or len(self._tool_by_item))
        index = self._tool_by_item.get(item_id)
        if index is None:
            index = self._tool_by_item[item_id] = len(self._tool_by_item)
            call_id = item.get("call_id") or item.get("id") or None
            self.builder.tool(index, call_id, item.get("name") or None, "")
        return index

    def _terminal(self, response: dict[str, Any]) -> None:
        builder = self.builder
        if self.server_id is None and isinstance(response.get("id"), str):
            self.server_id = response["id"]
        if not self._streamed:
            self._items(response.get("output") or [])
        if response.get("usage"):
            builder.usage(usage_from_responses(response["usage"]))
        status = response.get("status")
        if status == "failed" or status == "cancelled":
            error = response.get("error") or {}
            message = str(error.get("message") or f"response {status}")
            builder.error(
                "server_error" if status == "failed" else "abort", message, retryable=True
            )
        elif status == "incomplete":
            reason = str((response.get("incomplete_details") or {}).get("reason") or "")
            builder.finish("content_filter" if reason == "content_filter" else "length")
        else:
            builder.finish("tool_calls" if self._tool_by_item else "stop")
        builder.end(clean=True)

    def _items(self, output: list[Any]) -> None:
        for item in output:
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            if kind == "reasoning":
                parts = (item.get("content") or []) + (item.get("summary") or [])
                text = "".join(str(p.get("text") or "") for p in parts if isinstance(p, dict))
                if text:
                    self.builder.reasoning(text)
            elif kind == "message":
                for part in item.get("content") or []:
                    if isinstance(part, dict) and part.get("text"):
                        self.builder.text(str(part["text"]))
            elif kind == "function_call":
                index = self._function_call(item)
                if item.get("arguments"):
                    self.builder.tool(index, None, None, str(item["arguments"]))

    def body(self, body: dict[str, Any]) -> None:
        if "error" in body and body.get("object") != "response":
            error = body.get("error") or {}
            message = str(error.get("message") if isinstance(error, dict) else error)
            self.builder.error("server_error", message, retryable=True)
            self.builder.end(clean=True)
            return
        self._terminal(body)
