"""OpenAI Responses request body -> canonical request (Codex's side of the proxy).

Codex sends the whole conversation as ``input`` items with ``store: false``; reasoning items are
attached to the following assistant turn, consecutive calls share one assistant turn and
consecutive outputs one tool turn. ``custom`` (freeform) tools become a function with a single
string parameter ``input`` and are turned back on the way out (E50).
"""

from __future__ import annotations

import json
from typing import Any

from solver.llm.events import (
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
    DEFAULT_MAX_TOKENS,
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
    image_from_url,
    load_object,
    select_tool,
    text_parts,
    tool_spec,
)

_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text", "reasoning_text", "refusal")


def _parts(content: Any, where: str) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)]
    if not isinstance(content, list):
        fail(f"{where} must be a string or an array of parts")
    parts: list[Part] = []
    for i, raw in enumerate(content):
        at = f"{where}[{i}]"
        raw = get_dict(raw, at)
        kind = raw.get("type")
        if kind in _TEXT_PARTS:
            key = "refusal" if kind == "refusal" else "text"
            parts.append(TextPart(get_str(raw, key, at)))
        elif kind == "input_image":
            url = raw.get("image_url")
            if not isinstance(url, str):
                fail(f"{at}.image_url must be a URL (file ids are not supported)")
            parts.append(image_from_url(url, f"{at}.image_url"))
        else:
            fail(f"{at}.type {kind!r} is not supported")
    return parts


def _output_text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    return "".join(p.text for p in _parts(value, where) if isinstance(p, TextPart))


class _History:
    """Builds canonical messages from items, merging turns the way Chat templates need."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.cases: list[str] = []
        self._assistant: list[Part] = []
        self._results: list[ToolResultPart] = []

    def _flush(self) -> None:
        if self._assistant:
            self.messages.append(Message(role="assistant", parts=text_parts(self._assistant)))
            self._assistant = []
        if self._results:
            self.messages.append(Message(role="tool", parts=tuple(self._results)))
            self._results = []

    def assistant(self, parts: list[Part]) -> None:
        if self._results:
            self._flush()
        self._assistant.extend(parts)

    def result(self, part: ToolResultPart) -> None:
        if self._assistant:
            self._flush()
        self._results.append(part)

    def other(self, message: Message) -> None:
        self._flush()
        if message.parts:
            self.messages.append(message)

    def done(self) -> list[Message]:
        self._flush()
        return self.messages


def _item(history: _History, raw: Any, where: str) -> None:
    raw = get_dict(raw, where)
    kind = raw.get("type", "message")
    if kind == "message":
        role = raw.get("role")
        parts = _parts(raw.get("content"), f"{where}.content")
        if role == "assistant":
            history.assistant(parts)
        elif role in ("system", "developer"):
            text = "".join(p.text for p in parts if isinstance(p, TextPart))
            history.other(Message.text("system", text))
        elif role == "user":
            history.other(Message(role="user", parts=text_parts(parts)))
        else:
            fail(f"{where}.role must be user, assistant, system or developer")
    elif kind == "reasoning":
        texts = [
            get_str(get_dict(s, f"{where}.summary"), "text", f"{where}.summary")
            for s in get_list(raw, "summary", where)
        ]
        if not texts:
            texts = [
                p.text
                for p in _parts(raw.get("content"), f"{where}.content")
                if isinstance(p, TextPart)
            ]
        signature = raw.get("encrypted_content")
        history.assistant(
            [ThinkingPart("\n".join(texts), signature if isinstance(signature, str) else "")]
        )
    elif kind == "function_call":
        history.assistant(
            [
                ToolCallPart(
                    id=get_str(raw, "call_id", where),
                    name=get_str(raw, "name", where),
                    arguments=arguments_text(raw.get("arguments"), f"{where}.arguments"),
                )
            ]
        )
    elif kind == "custom_tool_call":
        arguments = json.dumps({"input": get_str(raw, "input", where)}, ensure_ascii=False)
        history.assistant(
            [ToolCallPart(get_str(raw, "call_id", where), get_str(raw, "name", where), arguments)]
        )
    elif kind in ("function_call_output", "custom_tool_call_output"):
        output = _output_text(raw.get("output"), f"{where}.output")
        call_id = raw.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            # an orphan output must not become tool_call_id "" (E50)
            history.cases.append("E50_orphan_output")
            history.other(Message.text("user", output))
        else:
            history.result(ToolResultPart(tool_call_id=call_id, content=output))
    else:
        history.cases.append(f"E50_item_{kind}_dropped"[:60])


def _tools(obj: dict[str, Any], cases: list[str]) -> tuple[tuple[ToolSpec, ...], frozenset[str]]:
    tools: list[ToolSpec] = []
    custom: set[str] = set()
    for i, raw in enumerate(get_list(obj, "tools", "body")):
        at = f"tools[{i}]"
        raw = get_dict(raw, at)
        kind = raw.get("type")
        if kind == "function":
            tools.append(
                tool_spec(raw.get("name"), raw.get("description"), raw.get("parameters"), at)
            )
        elif kind == "custom":
            name = get_str(raw, "name", at)
            description = raw.get("description") or ""
            schema = {
                "type": "object",
                "properties": {"input": {"type": "string", "description": "the raw tool input"}},
                "required": ["input"],
            }
            tools.append(tool_spec(name, description, schema, at))
            custom.add(name)
        else:
            cases.append("E50_tool_dropped")
    return tuple(tools), frozenset(custom)


def _reasoning(obj: dict[str, Any]) -> bool | None:
    reasoning = obj.get("reasoning")
    if reasoning is None:
        return None
    effort = get_dict(reasoning, "reasoning").get("effort")
    if effort is None:
        return None
    if not isinstance(effort, str):
        fail("reasoning.effort must be a string")
    return effort != "none"


def parse_responses(body: bytes, headers: dict[str, str]) -> FrontRequest:
    obj = load_object(body)
    model = get_str(obj, "model", "body")
    if obj.get("previous_response_id") is not None:
        fail("previous_response_id is not supported: send the whole input (store=false)")
    history = _History()
    leading: list[str] = []
    instructions = obj.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            fail("body.instructions must be a string")
        leading.append(instructions)
    raw_input = obj.get("input")
    if isinstance(raw_input, str):
        history.other(Message.text("user", raw_input))
    elif isinstance(raw_input, list):
        for i, item in enumerate(raw_input):
            _item(history, item, f"input[{i}]")
    else:
        fail("body.input must be a string or an array of items")
    messages = history.done()
    if not messages:
        fail("body.input must not be empty")
    cases = history.cases
    tools, custom = _tools(obj, cases)
    tool_choice: Any = None
    choice = obj.get("tool_choice")
    if isinstance(choice, str):
        if choice not in ("auto", "none", "required"):
            fail("body.tool_choice must be auto, none, required or a tool choice")
        tool_choice = choice
    elif choice is not None:
        choice = get_dict(choice, "tool_choice")
        if choice.get("type") in ("function", "custom"):
            tools, tool_choice = select_tool(
                tools, get_str(choice, "name", "tool_choice"), "tool_choice"
            )
        else:
            tool_choice = "auto"
    max_tokens = get_int(obj, "max_output_tokens", "body", minimum=1)
    stream = bool(get_bool(obj, "stream", "body"))
    request = Request(
        model=model,
        messages=collapse_system(messages, leading, cases),
        max_tokens=max_tokens or DEFAULT_MAX_TOKENS,
        temperature=get_float(obj, "temperature", "body"),
        top_p=get_float(obj, "top_p", "body"),
        reasoning=_reasoning(obj),
        tools=tools,
        tool_choice=tool_choice,
        stream=stream,
    )
    session = headers.get("session_id", "") or headers.get("x-session-id", "")
    if not session and isinstance(obj.get("prompt_cache_key"), str):
        session = obj["prompt_cache_key"]
    echo = {
        "instructions": instructions,
        "max_output_tokens": max_tokens,
        "tools": obj.get("tools") or [],
        "tool_choice": obj.get("tool_choice") or "auto",
        "parallel_tool_calls": obj.get("parallel_tool_calls", True),
        "temperature": request.temperature,
        "top_p": request.top_p,
    }
    return FrontRequest(
        request=request,
        stream=stream,
        client_model=model,
        custom_tools=custom,
        session_id=session[:200],
        cases=tuple(cases),
        echo=echo,
    )
