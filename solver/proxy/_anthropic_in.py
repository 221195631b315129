"""Anthropic Messages request body -> canonical request (Claude Code's side of the proxy)."""

from __future__ import annotations

from typing import Any

from solver.llm.events import (
    ImagePart,
    Message,
    Part,
    Request,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)

from ._parse import (
    FrontRequest,
    arguments_text,
    collapse_system,
    fail,
    get_bool,
    get_dict,
    get_float,
    get_int,
    get_list,
    get_str,
    load_object,
    select_tool,
    stop_list,
    text_parts,
    tool_spec,
)


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
    if role not in ("user", "assistant"):
        fail(f"{where}.role must be 'user' or 'assistant'")
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
            fail(f"{at}.type {kind!r} is not supported in a {role} message")
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


def _system(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        texts = []
        for i, block in enumerate(value):
            block = get_dict(block, f"system[{i}]")
            texts.append(get_str(block, "text", f"system[{i}]"))
        return ["\n\n".join(texts)]
    fail("system must be a string or an array of text blocks")


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
        messages=collapse_system(messages, _system(obj.get("system")), cases),
        max_tokens=max_tokens,
        temperature=get_float(obj, "temperature", "body"),
        top_p=get_float(obj, "top_p", "body"),
        stop=stop_list(obj.get("stop_sequences"), "body.stop_sequences"),
        reasoning=_reasoning(obj),
        tools=tools,
        tool_choice=tool_choice,
        stream=bool(get_bool(obj, "stream", "body")),
    )
    session = headers.get("x-claude-code-session-id", "") or user_id
    return FrontRequest(
        request=request,
        stream=request.stream,
        client_model=model,
        session_id=session[:200],
        cases=tuple(cases),
    )
