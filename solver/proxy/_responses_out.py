"""Canonical blocks -> OpenAI Responses events (research e.1 "Responses", E46-E48).

``response.created`` and ``response.in_progress`` open the stream; every item has the full
lifecycle (``output_item.added`` -> deltas -> ``*.done`` -> ``output_item.done``) with a stable
``call_id``; every event carries a monotonic ``sequence_number``; exactly one terminal event
(``response.completed`` / ``incomplete`` / ``failed``) ends it, whose ``output`` repeats the
items; never ``[DONE]``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from solver.llm.events import Usage

from ._turn import Block, TurnEnd, TurnFailure
from ._wire import KEEPALIVE_COMMENT, dumps, json_bytes, short_id


def responses_usage(usage: Usage) -> dict[str, Any]:
    """b.4: Responses ``input_tokens`` includes cached tokens, like the canonical value."""
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
        self, response_id: str, model: str, custom_tools: frozenset[str], echo: dict[str, Any]
    ) -> None:
        self._id = response_id
        self._model = model
        self._custom = custom_tools
        self._echo = echo
        self._created = int(time.time())
        self._seq = 0
        self._out: list[bytes] = []
        self._item_ids: dict[int, str] = {}
        self.items: list[dict[str, Any]] = []
        self.started = False
        self.ended = False

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
        return KEEPALIVE_COMMENT

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
                "name": block.tool_name,
                "input": "",
            }
        else:
            item_id = short_id("fc_")
            item = {
                "id": item_id,
                "type": "function_call",
                "status": "in_progress",
                "call_id": block.tool_id,
                "name": block.tool_name,
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
        self._out.append(
            (
                f'event: {kind}\ndata: {{"type":"{kind}","sequence_number":{seq},'
                f'"item_id":"{self._item_ids[index]}","output_index":{index}{extra},"delta":'
            ).encode()
            + json_bytes(fragment)
            + b"}\n\n"
        )

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
                "name": block.tool_name,
                "input": value,
            }
        else:
            self._emit(
                "response.function_call_arguments.done",
                {**where, "name": block.tool_name, "arguments": text},
            )
            item = {
                "id": item_id,
                "type": "function_call",
                "status": "completed",
                "call_id": block.tool_id,
                "name": block.tool_name,
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
