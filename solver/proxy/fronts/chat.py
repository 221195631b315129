"""OpenAI Chat Completions front: request body -> canonical request, blocks -> chunks / JSON.

Stream shape: the first chunk announces ``role:"assistant"``; reasoning goes
out as ``delta.reasoning_content``; one separate finish chunk with ``delta:{}``; a ``choices:[]``
usage chunk when ``stream_options.include_usage`` is set; then ``[DONE]``. A failure ends with an
``{"error":...}`` chunk and no ``[DONE]``.
"""

from __future__ import annotations

import time
from typing import Any

from solver.wire import (
    Message,
    Part,
    Request,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)

from .._parse import (
    DEFAULT_MAX_TOKENS,
    FrontRequest,
    arguments_text,
    collapse_system,
    content_parts,
    fail,
    get_bool,
    get_dict,
    get_float,
    get_int,
    get_list,
    get_str,
    image_from_url,
    keyword_choice,
    load_object,
    select_tool,
    session_id,
    stop_list,
    text_parts,
    tool_spec,
)
from .._turn import Block, TurnEnd, TurnFailure
from .._wire import DONE, KEEPALIVE_COMMENT, dumps, json_bytes, json_str, sse_data

# ------------------------------------------------------------------ request


def _content_parts(content: Any, where: str, allow_images: bool) -> list[Part]:
    def part(raw: dict[str, Any], at: str) -> Part:
        kind = raw.get("type")
        if kind == "text":
            return TextPart(get_str(raw, "text", at))
        if kind == "image_url" and allow_images:
            image = raw.get("image_url")
            url = image if isinstance(image, str) else get_str(get_dict(image, at), "url", at)
            return image_from_url(url, f"{at}.image_url.url")
        fail(f"{at}.type {kind!r} is not supported here")

    return content_parts(content, where, part)


def _message(raw: Any, where: str) -> Message:
    raw = get_dict(raw, where)
    role = raw.get("role")
    if role in ("system", "developer"):
        text = "".join(
            p.text
            for p in _content_parts(raw.get("content"), f"{where}.content", False)
            if isinstance(p, TextPart)
        )
        return Message.text("system", text)
    if role == "user":
        user = text_parts(_content_parts(raw.get("content"), f"{where}.content", True))
        return Message(role="user", parts=user)
    if role == "assistant":
        parts: list[Part] = []
        reasoning = raw.get("reasoning_content") or raw.get("reasoning")
        if reasoning is not None:
            if not isinstance(reasoning, str):
                fail(f"{where}.reasoning_content must be a string")
            parts.append(ThinkingPart(reasoning))
        parts.extend(_content_parts(raw.get("content"), f"{where}.content", False))
        for i, call in enumerate(get_list(raw, "tool_calls", where)):
            at = f"{where}.tool_calls[{i}]"
            call = get_dict(call, at)
            function = get_dict(call.get("function"), f"{at}.function")
            parts.append(
                ToolCallPart(
                    id=get_str(call, "id", at),
                    name=get_str(function, "name", f"{at}.function"),
                    arguments=arguments_text(function.get("arguments"), f"{at}.function.arguments"),
                )
            )
        return Message(role="assistant", parts=text_parts(parts))
    if role == "tool":
        content = _content_parts(raw.get("content"), f"{where}.content", False)
        text = "".join(p.text for p in content if isinstance(p, TextPart))
        result = ToolResultPart(tool_call_id=get_str(raw, "tool_call_id", where), content=text)
        return Message(role="tool", parts=(result,))
    fail(f"{where}.role must be system, developer, user, assistant or tool")


def _reasoning(obj: dict[str, Any]) -> bool | None:
    effort = obj.get("reasoning_effort")
    if effort is not None:
        if not isinstance(effort, str):
            fail("body.reasoning_effort must be a string")
        return effort != "none"
    kwargs = obj.get("chat_template_kwargs")
    if isinstance(kwargs, dict) and isinstance(kwargs.get("enable_thinking"), bool):
        return bool(kwargs["enable_thinking"])
    return None


def parse_chat(body: bytes, headers: dict[str, str]) -> FrontRequest:
    obj = load_object(body)
    model = get_str(obj, "model", "body")
    raw_messages = get_list(obj, "messages", "body")
    if not raw_messages:
        fail("body.messages must be a non-empty array")
    n = get_int(obj, "n", "body", minimum=1)
    if n not in (None, 1):
        fail("body.n: only one choice is supported")
    messages = [_message(m, f"messages[{i}]") for i, m in enumerate(raw_messages)]
    cases: list[str] = []
    tools = []
    for i, raw in enumerate(get_list(obj, "tools", "body")):
        raw = get_dict(raw, f"tools[{i}]")
        if raw.get("type", "function") != "function":
            fail(f"tools[{i}].type must be 'function'")
        function = get_dict(raw.get("function"), f"tools[{i}].function")
        tools.append(
            tool_spec(
                function.get("name"),
                function.get("description"),
                function.get("parameters"),
                f"tools[{i}].function",
            )
        )
    tool_specs = tuple(tools)
    tool_choice: Any = None
    choice = obj.get("tool_choice")
    if isinstance(choice, str):
        tool_choice = keyword_choice(choice, "a function choice")
    elif choice is not None:
        function = get_dict(get_dict(choice, "tool_choice").get("function"), "tool_choice.function")
        tool_specs, tool_choice = select_tool(
            tool_specs, get_str(function, "name", "tool_choice.function"), "tool_choice"
        )
    max_tokens = get_int(obj, "max_completion_tokens", "body", minimum=1)
    if max_tokens is None:
        max_tokens = get_int(obj, "max_tokens", "body", minimum=1)
    stream = bool(get_bool(obj, "stream", "body"))
    options = obj.get("stream_options")
    include_usage = False
    if options is not None:
        include_usage = bool(get_bool(get_dict(options, "stream_options"), "include_usage", "x"))
    request = Request(
        model=model,
        messages=collapse_system(messages, [], cases),
        max_tokens=max_tokens or DEFAULT_MAX_TOKENS,
        temperature=get_float(obj, "temperature", "body"),
        top_p=get_float(obj, "top_p", "body"),
        stop=stop_list(obj.get("stop"), "body.stop"),
        seed=get_int(obj, "seed", "body", minimum=-(2**63)),
        reasoning=_reasoning(obj),
        tools=tool_specs,
        tool_choice=tool_choice,
        stream=stream,
    )
    return FrontRequest(
        request=request,
        stream=stream,
        client_model=model,
        include_usage=include_usage,
        session_id=session_id(headers.get("x-session-id"), headers.get("session_id")),
        cases=tuple(cases),
    )


# ------------------------------------------------------------------ response


def chat_usage(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def error_body(status: int, message: str, kind: str = "") -> dict[str, Any]:
    if not kind:
        kind = {401: "authentication_error", 404: "not_found_error", 429: "rate_limit_error"}.get(
            status, "invalid_request_error" if status < 500 else "server_error"
        )
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}


def failure_status(failure: TurnFailure) -> int:
    if failure.status is not None and 400 <= failure.status < 600:
        return failure.status
    return 503 if failure.retryable else 502


class ChatStream:
    def __init__(self, completion_id: str, model: str, include_usage: bool) -> None:
        self._include_usage = include_usage
        self._created = int(time.time())
        self._id = completion_id
        self._model = model
        self._head = (
            f'data: {{"id":{json_str(completion_id)},"object":"chat.completion.chunk",'
            f'"created":{self._created},"model":{json_str(model)},"choices":[{{"index":0,"delta":'
        ).encode()
        self._tail = b',"logprobs":null,"finish_reason":null}]}\n\n'
        self._tool_ordinal: dict[int, int] = {}
        self._out: list[bytes] = []
        self.started = False
        self.ended = False

    def take(self) -> bytes:
        data = b"".join(self._out)
        self._out.clear()
        return data

    def start(self, usage: Usage) -> None:
        self._out.append(self._head + b'{"role":"assistant","content":""}' + self._tail)
        self.started = True

    def keepalive(self) -> bytes:
        return KEEPALIVE_COMMENT

    def open_block(self, block: Block) -> None:
        if block.kind != "tool":
            return
        ordinal = self._tool_ordinal[block.index] = len(self._tool_ordinal)
        call = {
            "index": ordinal,
            "id": block.tool_id,
            "type": "function",
            "function": {"name": block.tool_name, "arguments": ""},
        }
        self._out.append(self._head + dumps({"tool_calls": [call]}).encode() + self._tail)

    def block_delta(self, block: Block, fragment: str) -> None:
        # one join: a chain of + would copy a long fragment once per piece
        text = json_bytes(fragment)
        if block.kind == "text":
            parts = (self._head, b'{"content":', text, b"}", self._tail)
        elif block.kind == "thinking":
            parts = (self._head, b'{"reasoning_content":', text, b"}", self._tail)
        else:
            ordinal = self._tool_ordinal[block.index]
            opening = b'{"tool_calls":[{"index":%d,"function":{"arguments":' % ordinal
            parts = (self._head, opening, text, b"}}]}", self._tail)
        self._out.append(b"".join(parts))

    def close_block(self, block: Block) -> None:
        return

    def finish(self, end: TurnEnd) -> None:
        self._out.append(
            self._head + f'{{}},"logprobs":null,"finish_reason":"{end.reason}"}}]}}\n\n'.encode()
        )
        if self._include_usage:
            chunk = {
                "id": self._id,
                "object": "chat.completion.chunk",
                "created": self._created,
                "model": self._model,
                "choices": [],
                "usage": chat_usage(end.usage),
            }
            self._out.append(sse_data(dumps(chunk)))
        self._out.append(DONE)
        self.ended = True

    def fail(self, failure: TurnFailure) -> None:
        body = error_body(failure_status(failure), failure.message, failure.kind)
        self._out.append(sse_data(dumps(body)))
        self.ended = True


def render_completion(
    completion_id: str, model: str, blocks: list[Block], end: TurnEnd
) -> dict[str, Any]:
    text = "".join(b.text for b in blocks if b.kind == "text")
    reasoning = "".join(b.text for b in blocks if b.kind == "thinking")
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if reasoning:
        message["reasoning_content"] = reasoning
    calls = [
        {
            "id": b.tool_id,
            "type": "function",
            "function": {"name": b.tool_name, "arguments": b.text or "{}"},
        }
        for b in blocks
        if b.kind == "tool"
    ]
    if calls:
        message["tool_calls"] = calls
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": end.reason, "logprobs": None}
        ],
        "usage": chat_usage(end.usage),
    }
