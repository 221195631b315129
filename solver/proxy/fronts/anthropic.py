"""Anthropic Messages front (Claude Code's protocol), both directions.

In: a Messages request body -> the canonical request. Out: canonical blocks -> the SSE event
grammar Claude Code and the anthropic SDK expect, the non-streamed message, and errors.

Stream grammar: ``message_start`` once and first; blocks strictly sequential; a thinking block
ends with a ``signature_delta``; exactly one ``message_delta`` after the last block, then
``message_stop`` and nothing else; on failure ``event: error`` and no ``message_stop``.
"""

from __future__ import annotations

import json
from typing import Any

from solver.wire import (
    ImagePart,
    Message,
    Part,
    Request,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
)

from .. import _signature
from .._parse import (
    FrontRequest,
    arguments_text,
    fail,
    get_bool,
    get_dict,
    get_float,
    get_int,
    get_list,
    get_str,
    lead_system,
    load_object,
    select_tool,
    session_id,
    stop_list,
    text_parts,
    tool_spec,
)
from .._toolids import for_anthropic
from .._turn import Block, TurnEnd, TurnFailure
from .._wire import dumps, json_bytes, sse_event

# ------------------------------------------------------------------ request


def _image(block: dict[str, Any], where: str) -> ImagePart:
    source = get_dict(block.get("source"), f"{where}.source")
    kind = source.get("type")
    if kind == "base64":
        return ImagePart(
            media_type=get_str(source, "media_type", f"{where}.source"),
            data=get_str(source, "data", f"{where}.source"),
        )
    if kind == "url":
        return ImagePart(url=get_str(source, "url", f"{where}.source"))
    fail(f"{where}.source.type must be 'base64' or 'url'")


def _tool_result(block: dict[str, Any], where: str) -> tuple[ToolResultPart, list[ImagePart]]:
    content = block.get("content")
    images: list[ImagePart] = []
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    elif isinstance(content, list):
        texts = []
        for j, item in enumerate(content):
            item = get_dict(item, f"{where}.content[{j}]")
            if item.get("type") == "text":
                texts.append(get_str(item, "text", f"{where}.content[{j}]"))
            elif item.get("type") == "image":
                images.append(_image(item, f"{where}.content[{j}]"))
            else:
                fail(f"{where}.content[{j}].type must be 'text' or 'image'")
        text = "\n".join(texts)
    else:
        fail(f"{where}.content must be a string or an array")
    part = ToolResultPart(
        tool_call_id=get_str(block, "tool_use_id", where),
        content=text,
        is_error=bool(get_bool(block, "is_error", where)),
    )
    return part, images


def _message(raw: Any, where: str, cases: list[str]) -> list[Message]:
    raw = get_dict(raw, where)
    role = raw.get("role")
    if role == "system":
        # Claude Code's mid-conversation-system beta: instructions at this point of the
        # conversation, kept in place (see _system for how each upstream gets them)
        said = _system(raw.get("content"), f"{where}.content")
        return [Message.text("system", said[0])] if said and said[0] else []
    if role not in ("user", "assistant"):
        # Anthropic's own wording: Claude Code matches it to turn its betas off and resend
        fail(
            f"{where}: Unexpected role {json.dumps(role)}. The Messages API accepts "
            "'user' and 'assistant' as an input message role"
        )
    content = raw.get("content")
    if isinstance(content, str):
        return [Message.text(role, content)] if content else []
    if not isinstance(content, list):
        fail(f"{where}.content must be a string or an array of blocks")
    parts: list[Part] = []
    results: list[ToolResultPart] = []
    result_images: list[ImagePart] = []
    for i, block in enumerate(content):
        at = f"{where}.content[{i}]"
        block = get_dict(block, at)
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(get_str(block, "text", at)))
        elif kind == "image":
            parts.append(_image(block, at))
        elif kind == "thinking" and role == "assistant":
            text = get_str(block, "thinking", at, default="")
            signature = get_str(block, "signature", at, default="")
            if not text and not signature:
                cases.append("E27_empty_unsigned_thinking_dropped")
                continue
            parts.append(ThinkingPart(text, signature))
        elif kind == "redacted_thinking" and role == "assistant":
            cases.append("redacted_thinking_dropped")
        elif kind == "tool_use" and role == "assistant":
            parts.append(
                ToolCallPart(
                    id=get_str(block, "id", at),
                    name=get_str(block, "name", at),
                    arguments=arguments_text(block.get("input"), f"{at}.input"),
                )
            )
        elif kind == "tool_result" and role == "user":
            result, images = _tool_result(block, at)
            results.append(result)
            result_images.extend(images)
        else:
            # worded as Anthropic words an unknown block, which Claude Code recognises
            fail(
                f"{at}.type: Input tag {json.dumps(kind)} found using 'type' does not match "
                f"any of the expected tags in a {role} message"
            )
    out: list[Message] = []
    if results:
        # Tool results go first in their own turn; images they carried follow as user content
        # (Chat tool messages cannot hold images).
        out.append(Message(role="tool", parts=tuple(results)))
        if result_images:
            cases.append("tool_result_images_moved")
    rest = text_parts(parts + list(result_images))
    if rest:
        out.append(Message(role=role, parts=rest))
    return out


def _system(value: Any, where: str = "system") -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        texts = []
        for i, block in enumerate(value):
            block = get_dict(block, f"{where}[{i}]")
            texts.append(get_str(block, "text", f"{where}[{i}]"))
        return ["\n\n".join(texts)]
    fail(f"{where} must be a string or an array of text blocks")


def _tools(body: dict[str, Any]) -> tuple[ToolSpec, ...]:
    tools = []
    for i, raw in enumerate(get_list(body, "tools", "body")):
        raw = get_dict(raw, f"tools[{i}]")
        tools.append(
            tool_spec(
                raw.get("name"), raw.get("description"), raw.get("input_schema"), f"tools[{i}]"
            )
        )
    return tuple(tools)


def _reasoning(body: dict[str, Any]) -> bool | None:
    thinking = body.get("thinking")
    if thinking is None:
        return None
    thinking = get_dict(thinking, "thinking")
    kind = thinking.get("type")
    if kind in ("enabled", "adaptive"):
        return True
    if kind == "disabled":
        return False
    fail("thinking.type must be 'enabled', 'adaptive' or 'disabled'")


def parse_messages(body: bytes, headers: dict[str, str], *, counting: bool = False) -> FrontRequest:
    """``counting``: a ``count_tokens`` body, which has no ``max_tokens``."""
    obj = load_object(body)
    model = get_str(obj, "model", "body")
    max_tokens = get_int(obj, "max_tokens", "body", minimum=1)
    if max_tokens is None:
        if not counting:
            fail("body.max_tokens is required")
        max_tokens = 1
    cases: list[str] = []
    messages: list[Message] = []
    raw_messages = get_list(obj, "messages", "body")
    if not raw_messages:
        fail("body.messages must be a non-empty array")
    for i, raw in enumerate(raw_messages):
        messages.extend(_message(raw, f"messages[{i}]", cases))
    tools = _tools(obj)
    tool_choice: Any = None
    choice = obj.get("tool_choice")
    if choice is not None:
        choice = get_dict(choice, "tool_choice")
        kind = choice.get("type")
        if kind == "auto":
            tool_choice = "auto"
        elif kind == "any":
            tool_choice = "required"
        elif kind == "none":
            tool_choice = "none"
        elif kind == "tool":
            tools, tool_choice = select_tool(
                tools, get_str(choice, "name", "tool_choice"), "tool_choice"
            )
        else:
            fail("tool_choice.type must be 'auto', 'any', 'tool' or 'none'")
    metadata = obj.get("metadata")
    user_id = ""
    if isinstance(metadata, dict) and isinstance(metadata.get("user_id"), str):
        user_id = metadata["user_id"]
    request = Request(
        model=model,
        messages=lead_system(messages, _system(obj.get("system")), cases),
        max_tokens=max_tokens,
        temperature=get_float(obj, "temperature", "body"),
        top_p=get_float(obj, "top_p", "body"),
        stop=stop_list(obj.get("stop_sequences"), "body.stop_sequences"),
        reasoning=_reasoning(obj),
        tools=tools,
        tool_choice=tool_choice,
        stream=bool(get_bool(obj, "stream", "body")),
    )
    return FrontRequest(
        request=request,
        stream=request.stream,
        client_model=model,
        session_id=session_id(headers.get("x-claude-code-session-id"), user_id),
        cases=tuple(cases),
    )


# ------------------------------------------------------------------ response


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
    ``api_error``; silence and overload are ``overloaded_error``, which Claude
    Code retries; a 4xx keeps its own type."""
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
    """Anthropic ``input_tokens`` excludes cache reads; canonical input includes them."""
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
    the upstream named the string it matched and the client asked for that string; an
    end-of-turn token the server matched on its own stays ``end_turn``."""
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
    """Parse tool arguments once at the end; text that is not a JSON object is
    kept under ``_raw`` so nothing the model produced is lost silently."""
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        return {"_raw": arguments}
    return value if isinstance(value, dict) else {"_raw": arguments}
