"""OpenAI Responses front (Codex's protocol), both directions.

In: Codex sends the whole conversation as ``input`` items with ``store: false``; reasoning items
are attached to the following assistant turn, consecutive calls share one assistant turn and
consecutive outputs one tool turn. ``custom`` (freeform) tools become a function with a single
string parameter ``input`` and are turned back on the way out.

Out: ``response.created`` and ``response.in_progress`` open the stream; every item has the full
lifecycle (``output_item.added`` -> deltas -> ``*.done`` -> ``output_item.done``) with a stable
``call_id``; every event carries a monotonic ``sequence_number``; exactly one terminal event
(``response.completed`` / ``incomplete`` / ``failed``) ends it, whose ``output`` repeats the
items; never ``[DONE]``.
"""

from __future__ import annotations

import json
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
    ToolSpec,
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
    text_parts,
    tool_spec,
)
from .._turn import Block, TurnEnd, TurnFailure
from .._wire import dumps, json_bytes, short_id

# ------------------------------------------------------------------ request


_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text", "reasoning_text", "refusal")


def _parts(content: Any, where: str) -> list[Part]:
    def part(raw: dict[str, Any], at: str) -> Part:
        kind = raw.get("type")
        if kind in _TEXT_PARTS:
            key = "refusal" if kind == "refusal" else "text"
            return TextPart(get_str(raw, key, at))
        if kind == "input_image":
            url = raw.get("image_url")
            if not isinstance(url, str):
                fail(f"{at}.image_url must be a URL (file ids are not supported)")
            return image_from_url(url, f"{at}.image_url")
        fail(f"{at}.type {kind!r} is not supported")

    return content_parts(content, where, part)


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


def qualified(namespace: str, name: str) -> str:
    """The one name a namespaced tool has upstream (Chat and Anthropic names allow no dots)."""
    return f"{namespace}__{name}" if namespace else name


def _call_name(raw: dict[str, Any], where: str) -> str:
    namespace = raw.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        fail(f"{where}.namespace must be a string")
    return qualified(namespace or "", get_str(raw, "name", where))


def _item(history: _History, tools: _Tools, raw: Any, where: str) -> None:
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
    elif kind == "additional_tools":
        # Codex's current releases send their tools here, not in the top-level "tools"
        for i, tool in enumerate(get_list(raw, "tools", where)):
            tools.add(tool, f"{where}.tools[{i}]")
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
                    name=_call_name(raw, where),
                    arguments=arguments_text(raw.get("arguments"), f"{where}.arguments"),
                )
            ]
        )
    elif kind == "custom_tool_call":
        arguments = json.dumps({"input": get_str(raw, "input", where)}, ensure_ascii=False)
        history.assistant(
            [ToolCallPart(get_str(raw, "call_id", where), _call_name(raw, where), arguments)]
        )
    elif kind in ("function_call_output", "custom_tool_call_output"):
        output = _output_text(raw.get("output"), f"{where}.output")
        call_id = raw.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            # an orphan output must not become tool_call_id ""
            history.cases.append("E50_orphan_output")
            history.other(Message.text("user", output))
        else:
            history.result(ToolResultPart(tool_call_id=call_id, content=output))
    else:
        history.cases.append(f"E50_item_{kind}_dropped"[:60])


_CUSTOM_SCHEMA = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "the raw tool input"}},
    "required": ["input"],
}


def _custom_description(raw: dict[str, Any], where: str) -> str:
    """A custom tool's input format, told to a model that only knows JSON arguments."""
    description = raw.get("description") or ""
    if not isinstance(description, str):
        fail(f"{where}.description must be a string")
    fmt = raw.get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "grammar":
        syntax = fmt.get("syntax") if isinstance(fmt.get("syntax"), str) else "grammar"
        definition = fmt.get("definition") if isinstance(fmt.get("definition"), str) else ""
        description += (
            "\n\nPut the raw tool input in the string field `input`; it must match this "
            f"{syntax} grammar:\n{definition}"
        )
    else:
        description += "\n\nPut the raw tool input (free text, not JSON) in the field `input`."
    return description


class _Tools:
    """Tools from ``tools`` and ``additional_tools`` items, namespaces flattened to qualified
    names; each kind the proxy cannot offer an upstream is noted once."""

    def __init__(self, history: _History) -> None:
        self._history = history
        self.specs: dict[str, ToolSpec] = {}
        self.custom: set[str] = set()
        self.namespaced: dict[str, tuple[str, str]] = {}

    def add(self, raw: Any, where: str, namespace: str = "") -> None:
        raw = get_dict(raw, where)
        kind = raw.get("type")
        if kind == "namespace" and not namespace:
            inner = get_str(raw, "name", where)
            for i, tool in enumerate(get_list(raw, "tools", where)):
                self.add(tool, f"{where}.tools[{i}]", inner)
            return
        if kind not in ("function", "custom"):
            # the row keeps each code once, however many tools of the kind came
            self._history.cases.append(f"E50_tool_{kind}_unsupported"[:60])
            return
        name = get_str(raw, "name", where)
        full = qualified(namespace, name)
        if kind == "function":
            spec = tool_spec(full, raw.get("description"), raw.get("parameters"), where)
        else:
            spec = tool_spec(full, _custom_description(raw, where), _CUSTOM_SCHEMA, where)
            self.custom.add(full)
        if namespace:
            self.namespaced[full] = (namespace, name)
        self.specs[full] = spec


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
    tools_in = _Tools(history)
    for i, tool in enumerate(get_list(obj, "tools", "body")):
        tools_in.add(tool, f"tools[{i}]")
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
            _item(history, tools_in, item, f"input[{i}]")
    else:
        fail("body.input must be a string or an array of items")
    messages = history.done()
    if not messages:
        fail("body.input must not be empty")
    cases = history.cases
    tools, custom = tuple(tools_in.specs.values()), frozenset(tools_in.custom)
    tool_choice: Any = None
    choice = obj.get("tool_choice")
    if isinstance(choice, str):
        tool_choice = keyword_choice(choice, "a tool choice")
    elif choice is not None:
        choice = get_dict(choice, "tool_choice")
        if choice.get("type") in ("function", "custom"):
            name = _call_name(choice, "tool_choice")
            tools, tool_choice = select_tool(tools, name, "tool_choice")
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
        namespaced=tools_in.namespaced,
        session_id=session_id(
            headers.get("session_id"), headers.get("x-session-id"), obj.get("prompt_cache_key")
        ),
        cases=tuple(cases),
        echo=echo,
    )


# ------------------------------------------------------------------ response


def responses_usage(usage: Usage) -> dict[str, Any]:
    """Responses ``input_tokens`` includes cached tokens, like the canonical value."""
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


# the types OpenAI's own API sends for these statuses (clients back off on rate_limit_error)
_ERROR_TYPES = {401: "authentication_error", 404: "not_found_error", 429: "rate_limit_error"}


def error_body(status: int, message: str, kind: str = "") -> dict[str, Any]:
    if not kind:
        kind = _ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}


def _custom_input(arguments: str) -> str:
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    if isinstance(value, dict) and isinstance(value.get("input"), str):
        return str(value["input"])
    return arguments


class ResponsesStream:
    def __init__(
        self,
        response_id: str,
        model: str,
        custom_tools: frozenset[str],
        echo: dict[str, Any],
        namespaced: dict[str, tuple[str, str]] | None = None,
    ) -> None:
        self._id = response_id
        self._model = model
        self._custom = custom_tools
        self._namespaced = namespaced or {}
        self._echo = echo
        self._created = int(time.time())
        self._seq = 0
        self._out: list[bytes] = []
        self._item_ids: dict[int, str] = {}
        self.items: list[dict[str, Any]] = []
        self.started = False
        self.ended = False

    def _named(self, block: Block) -> dict[str, str]:
        """A call's name as the client declared it: a namespaced tool's own name and its
        namespace, not the qualified name the upstream saw."""
        if block.tool_name in self._namespaced:
            namespace, name = self._namespaced[block.tool_name]
            return {"name": name, "namespace": namespace}
        return {"name": block.tool_name}

    def take(self) -> bytes:
        data = b"".join(self._out)
        self._out.clear()
        return data

    def _emit(self, kind: str, payload: dict[str, Any]) -> None:
        body = {"type": kind, "sequence_number": self._seq, **payload}
        self._seq += 1
        self._out.append(f"event: {kind}\ndata: {dumps(body)}\n\n".encode())

    def response(self, status: str, usage: Usage | None = None, **extra: Any) -> dict[str, Any]:
        return {
            "id": self._id,
            "object": "response",
            "created_at": self._created,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "model": self._model,
            "output": list(self.items),
            "reasoning": {"effort": None, "summary": None},
            "store": False,
            "text": {"format": {"type": "text"}},
            "truncation": "disabled",
            "usage": responses_usage(usage) if usage is not None else None,
            "metadata": {},
            **self._echo,
            **extra,
        }

    def start(self, usage: Usage) -> None:
        self._emit("response.created", {"response": self.response("in_progress")})
        self._emit("response.in_progress", {"response": self.response("in_progress")})
        self.started = True

    def keepalive(self) -> bytes:
        """Codex's stream idle timer counts data events only, not SSE comments: repeat
        ``response.in_progress`` (clients take it as a no-op status update)."""
        self._emit("response.in_progress", {"response": self.response("in_progress")})
        return self.take()

    # TurnSink
    def open_block(self, block: Block) -> None:
        index = block.index
        if block.kind == "thinking":
            item_id = short_id("rs_")
            item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": []}
        elif block.kind == "text":
            item_id = short_id("msg_")
            item = {
                "id": item_id,
                "type": "message",
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
        elif block.tool_name in self._custom:
            item_id = short_id("ctc_")
            item = {
                "id": item_id,
                "type": "custom_tool_call",
                "status": "in_progress",
                "call_id": block.tool_id,
                **self._named(block),
                "input": "",
            }
        else:
            item_id = short_id("fc_")
            item = {
                "id": item_id,
                "type": "function_call",
                "status": "in_progress",
                "call_id": block.tool_id,
                **self._named(block),
                "arguments": "",
            }
        self._item_ids[index] = item_id
        self._emit("response.output_item.added", {"output_index": index, "item": item})
        if block.kind == "thinking":
            part: dict[str, Any] = {"type": "summary_text", "text": ""}
            self._emit(
                "response.reasoning_summary_part.added",
                {"item_id": item_id, "output_index": index, "summary_index": 0, "part": part},
            )
        elif block.kind == "text":
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            self._emit(
                "response.content_part.added",
                {"item_id": item_id, "output_index": index, "content_index": 0, "part": part},
            )

    def block_delta(self, block: Block, fragment: str) -> None:
        index = block.index
        if block.kind == "text":
            kind, extra = "response.output_text.delta", ',"content_index":0,"logprobs":[]'
        elif block.kind == "thinking":
            kind, extra = "response.reasoning_summary_text.delta", ',"summary_index":0'
        elif block.tool_name in self._custom:
            return  # the custom input is the "input" field of the JSON: sent whole at close
        else:
            kind, extra = "response.function_call_arguments.delta", ""
        seq = self._seq
        self._seq += 1
        head = (
            f'event: {kind}\ndata: {{"type":"{kind}","sequence_number":{seq},'
            f'"item_id":"{self._item_ids[index]}","output_index":{index}{extra},"delta":'
        ).encode()
        self._out.append(b"".join((head, json_bytes(fragment), b"}\n\n")))

    def close_block(self, block: Block) -> None:
        index = block.index
        item_id = self._item_ids[index]
        text = block.text
        where = {"item_id": item_id, "output_index": index}
        part: dict[str, Any]
        if block.kind == "thinking":
            part = {"type": "summary_text", "text": text}
            self._emit(
                "response.reasoning_summary_text.done", {**where, "summary_index": 0, "text": text}
            )
            self._emit(
                "response.reasoning_summary_part.done", {**where, "summary_index": 0, "part": part}
            )
            item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": [part]}
            if block.signature:
                item["encrypted_content"] = block.signature
        elif block.kind == "text":
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            self._emit(
                "response.output_text.done",
                {**where, "content_index": 0, "text": text, "logprobs": []},
            )
            self._emit("response.content_part.done", {**where, "content_index": 0, "part": part})
            item = {
                "id": item_id,
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [part],
            }
        elif block.tool_name in self._custom:
            value = _custom_input(text)
            self._emit("response.custom_tool_call_input.delta", {**where, "delta": value})
            self._emit("response.custom_tool_call_input.done", {**where, "input": value})
            item = {
                "id": item_id,
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": block.tool_id,
                **self._named(block),
                "input": value,
            }
        else:
            self._emit(
                "response.function_call_arguments.done",
                {**where, **self._named(block), "arguments": text},
            )
            item = {
                "id": item_id,
                "type": "function_call",
                "status": "completed",
                "call_id": block.tool_id,
                **self._named(block),
                "arguments": text,
            }
        self.items.append(item)
        self._emit("response.output_item.done", {"output_index": index, "item": item})

    def final_response(self, end: TurnEnd) -> dict[str, Any]:
        if end.reason in ("length", "content_filter"):
            reason = "max_output_tokens" if end.reason == "length" else "content_filter"
            return self.response("incomplete", end.usage, incomplete_details={"reason": reason})
        return self.response("completed", end.usage)

    def finish(self, end: TurnEnd) -> None:
        response = self.final_response(end)
        kind = "response.completed" if response["status"] == "completed" else "response.incomplete"
        self._emit(kind, {"response": response})
        self.ended = True

    def fail(self, failure: TurnFailure) -> None:
        error = {"code": failure.kind, "message": failure.message}
        self._emit("response.failed", {"response": self.response("failed", error=error)})
        self.ended = True
