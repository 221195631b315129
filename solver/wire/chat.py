"""OpenAI Chat Completions as spoken by SGLang (glm45/glm47 parsers), vLLM, llama.cpp and Z.ai.

Request: ``reasoning`` maps to ``chat_template_kwargs.enable_thinking`` (the GLM template toggle
SGLang and vLLM read); streams always ask for ``stream_options.include_usage``. Earlier
assistant thinking goes back as ``reasoning_content`` (GLM interleaved thinking, b1).

Stream: every chunk passes through :meth:`ChatDecoder.chunk`, which applies the catalogue's
Chat rules and hands canonical deltas to the shared :class:`EventBuilder`.
"""

from __future__ import annotations

from typing import Any

import orjson

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

__all__ = ["ChatDecoder", "encode_chat", "usage_from_chat"]


def _content(parts: tuple[Any, ...]) -> str | list[dict[str, Any]]:
    texts = [p for p in parts if isinstance(p, TextPart)]
    images = [p for p in parts if isinstance(p, ImagePart)]
    if not images:
        return "".join(p.text for p in texts)
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            url = part.url or f"data:{part.media_type};base64,{part.data}"
            out.append({"type": "image_url", "image_url": {"url": url}})
    return out


def _messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        results = [p for p in message.parts if isinstance(p, ToolResultPart)]
        for result in results:
            out.append(
                {"role": "tool", "tool_call_id": result.tool_call_id, "content": result.content}
            )
        rest = tuple(p for p in message.parts if not isinstance(p, ToolResultPart))
        if results and not rest:
            continue
        entry: dict[str, Any] = {"role": "user" if message.role == "tool" else message.role}
        entry["content"] = _content(rest)
        thinking = "".join(p.text for p in rest if isinstance(p, ThinkingPart))
        if thinking:
            entry["reasoning_content"] = thinking
        calls = [p for p in rest if isinstance(p, ToolCallPart)]
        if calls:
            entry["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in calls
            ]
        out.append(entry)
    return out


def encode_chat(request: Request) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": request.model,
        "messages": _messages(request.messages),
        "max_tokens": request.max_tokens,
        "stream": request.stream,
    }
    if request.stream:
        body["stream_options"] = {"include_usage": True}
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.stop:
        body["stop"] = list(request.stop)
    if request.seed is not None:
        body["seed"] = request.seed
    if request.reasoning is not None:
        body["chat_template_kwargs"] = {"enable_thinking": request.reasoning}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in request.tools
        ]
    if request.tool_choice is not None:
        body["tool_choice"] = request.tool_choice
    return body


def usage_from_chat(raw: dict[str, Any]) -> Usage:
    """Chat usage (b4): ``prompt_tokens`` already includes cached tokens."""
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    cached = (
        as_int(prompt_details.get("cached_tokens"))
        or as_int(raw.get("cache_read_input_tokens"))
        or as_int(raw.get("prompt_cache_hit_tokens"))
    )
    return Usage(
        input_tokens=as_int(raw.get("prompt_tokens")),
        cached_tokens=cached,
        output_tokens=as_int(raw.get("completion_tokens")),
        reasoning_tokens=as_int(completion_details.get("reasoning_tokens")),
    )


def _error_of(chunk: dict[str, Any]) -> tuple[str, int | None] | None:
    """An in-band error object (E36): ``{"error": {...}}`` or a bare ``object: "error"``."""
    error = chunk.get("error")
    if error is None and chunk.get("object") != "error":
        return None
    body = error if isinstance(error, dict) else chunk
    message = str(body.get("message") or error or "error in stream")
    code = body.get("code")
    status = code if isinstance(code, int) else None
    return message, status


class ChatDecoder:
    """Chat Completions stream (and body) decoder for one response."""

    def __init__(self, builder: EventBuilder) -> None:
        self.builder = builder
        self.server_id: str | None = None
        self._tool_keys: dict[int, int] = {}
        self._tool_ids: dict[str, int] = {}
        self._tool_named: set[int] = set()
        self._last_tool: int | None = None
        self._next_tool = 0
        self._in_body = False

    def feed(self, event: str | None, data: bytes) -> None:
        builder = self.builder
        if data == b"[DONE]":
            builder.end(clean=True)
            return
        if builder.closed:
            return
        self.builder.dispatch(data, self.chunk)

    def chunk(self, chunk: dict[str, Any]) -> None:
        builder = self.builder
        if self.server_id is None and isinstance(chunk.get("id"), str):
            self.server_id = chunk["id"]
        failure = _error_of(chunk)
        if failure is not None:
            message, status = failure
            builder.cases.add("E36_error_in_stream")
            retryable = status is None or status == 429 or status >= 500
            builder.error("server_error", message, retryable=retryable, status=status)
            # the error is the terminal: end now, as the other decoders do, so nothing after
            # it is emitted and a server that then goes silent is not waited on
            builder.end(clean=False)
            return
        usage = chunk.get("usage")
        choices = chunk.get("choices")
        if usage:
            builder.usage(usage_from_chat(usage))
            if choices and not builder.finished and not self._in_body:
                builder.cases.add("E16_usage_every_chunk")
        if not choices:
            if usage:
                builder.cases.add("E01_usage_tail")
            return
        choice = choices[0]
        delta = choice.get("delta") or choice.get("message")
        if delta:
            reasoning = delta.get("reasoning_content")
            if not reasoning:
                reasoning = delta.get("reasoning")
                if reasoning:
                    builder.cases.add("E17_reasoning_alias")
            if reasoning:
                builder.reasoning(reasoning)
            text = delta.get("content")
            if text:
                builder.text(text)
            calls = delta.get("tool_calls")
            if calls:
                for call in calls:
                    self._tool(call)
            elif calls is not None:
                builder.cases.add("E14_empty_tool_calls")
            legacy = delta.get("function_call")
            if legacy:
                builder.cases.add("E18_function_call")
                self._tool({"index": 0, "function": legacy})
        finish = choice.get("finish_reason")
        if finish:
            builder.finish(finish, choice.get("matched_stop"))
        elif finish == "":
            builder.cases.add("E15_empty_finish")

    def _tool(self, call: dict[str, Any]) -> None:
        index = call.get("index")
        call_id = call.get("id") or None
        function = call.get("function") or {}
        name = function.get("name") or None
        arguments = function.get("arguments") or ""
        if not isinstance(arguments, str):
            arguments = orjson.dumps(arguments).decode()
        key: int | None
        if isinstance(index, int):
            key = self._tool_keys.get(index)
            if key is None:
                key = self._tool_keys[index] = self._new_tool_key()
        else:
            # E30: a new call only when a new, unseen id appears; else continue the last one
            if not self._in_body:
                self.builder.cases.add("E30_tool_without_index")
            if (call_id and call_id not in self._tool_ids) or self._last_tool is None:
                key = self._new_tool_key()
            else:
                key = self._last_tool
        self._last_tool = key
        if call_id is not None:
            if self._tool_ids.get(call_id) == key:
                call_id = None  # a repeated id is not a new call (E30, E47)
            else:
                self._tool_ids[call_id] = key
        if name is not None:
            if key in self._tool_named:
                name = None
            else:
                self._tool_named.add(key)
        if call_id is None and name is None and not arguments:
            return
        self.builder.tool(key, call_id, name, arguments)

    def _new_tool_key(self) -> int:
        key, self._next_tool = self._next_tool, self._next_tool + 1
        return key

    def body(self, body: dict[str, Any]) -> None:
        """A whole non-stream response."""
        self._in_body = True
        self.chunk(body)
        self.builder.end(clean=True)
