"""Wire encodings of a scripted :class:`Reply` for the fake endpoint, one function per protocol.

Streams are lists of complete SSE frames (bytes); faults count these frames. Shapes follow what
the real servers send: SGLang's Chat Completions chunks (role first, reasoning in
``reasoning_content``, usage in a last chunk with empty ``choices``), and the official
Responses and Anthropic Messages event vocabularies for the other two.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Fault:
    """A failure to inject into one response. Counts are SSE frames already sent."""

    status: int | None = None
    retry_after: float | None = None
    message: str | None = None
    stall_after_chunks: int | None = None
    stall_seconds: float = 3600
    reset_after_chunks: int | None = None
    error_event_after_chunks: int | None = None
    truncate_after_chunks: int | None = None
    prefill_delay: float = 0.0
    malformed_json_after_chunks: int | None = None


@dataclass
class Reply:
    """What the fake model answers. ``raw_chunks`` replaces the generated stream verbatim."""

    text: str = ""
    reasoning: str = ""
    tool_calls: list[tuple[str, str, str]] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: tuple[int, int] | None = None
    cached_tokens: int = 0
    chunk_chars: int = 8
    fault: Fault | None = None
    raw_chunks: list[bytes] | None = None
    chunk_delay: float = 0.0
    # the stop string (or, as SGLang also reports, token id) that ended the output
    matched_stop: str | int | None = None


def _dump(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def data_frame(obj: Any) -> bytes:
    return f"data: {_dump(obj)}\n\n".encode()


def event_frame(name: str, obj: Any) -> bytes:
    return f"event: {name}\ndata: {_dump(obj)}\n\n".encode()


DONE = b"data: [DONE]\n\n"


def pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def usage_of(reply: Reply, prompt_chars: int) -> tuple[int, int]:
    if reply.usage is not None:
        return reply.usage
    produced = len(reply.text) + len(reply.reasoning) + sum(len(a) for _, _, a in reply.tool_calls)
    return max(1, prompt_chars // 4), max(1, produced // 4)


def reasoning_tokens_of(reply: Reply, completion: int) -> int:
    produced = len(reply.text) + len(reply.reasoning)
    if not reply.reasoning or produced == 0:
        return 0
    return min(completion, round(completion * len(reply.reasoning) / produced))


# ---------------------------------------------------------------- Chat Completions (SGLang style)


def chat_stream(
    reply: Reply, *, rid: str, model: str, prompt_chars: int, usage: bool
) -> list[bytes]:
    head = {"id": rid, "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return data_frame({**head, "choices": [choice]})

    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({"reasoning_content": p}) for p in pieces(reply.reasoning, reply.chunk_chars)]
    frames += [chunk({"content": p}) for p in pieces(reply.text, reply.chunk_chars)]
    for index, (call_id, name, args) in enumerate(reply.tool_calls):
        opening = {"index": index, "id": call_id, "type": "function"}
        frames.append(
            chunk({"tool_calls": [{**opening, "function": {"name": name, "arguments": ""}}]})
        )
        for p in pieces(args, reply.chunk_chars):
            frames.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]}))
    finish_frame = chunk({}, reply.finish_reason)
    if reply.matched_stop is not None:
        choice = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": reply.finish_reason}
        choice["matched_stop"] = reply.matched_stop
        finish_frame = data_frame({**head, "choices": [choice]})
    frames.append(finish_frame)
    if usage:
        prompt, completion = usage_of(reply, prompt_chars)
        body: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": reply.cached_tokens},
            "completion_tokens_details": {
                "reasoning_tokens": reasoning_tokens_of(reply, completion)
            },
        }
        frames.append(data_frame({**head, "choices": [], "usage": body}))
    frames.append(DONE)
    return frames


def chat_body(reply: Reply, *, rid: str, model: str, prompt_chars: int) -> dict[str, Any]:
    prompt, completion = usage_of(reply, prompt_chars)
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in reply.tool_calls
        ]
    return {
        "id": rid,
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": reply.finish_reason,
                "matched_stop": reply.matched_stop,
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": reply.cached_tokens},
            "completion_tokens_details": {
                "reasoning_tokens": reasoning_tokens_of(reply, completion)
            },
        },
    }


def chat_error(message: str, status: int) -> dict[str, Any]:
    kind = "BadRequestError" if status < 500 else "ServiceUnavailable"
    return {"error": {"object": "error", "message": message, "type": kind, "code": status}}


# ---------------------------------------------------------------- OpenAI Responses


def _responses_items(reply: Reply, rid: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.reasoning:
        items.append(
            {
                "type": "reasoning",
                "id": f"rs_{rid}",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": reply.reasoning}],
            }
        )
    if reply.text:
        items.append(
            {
                "type": "message",
                "id": f"msg_{rid}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for call_id, name, args in reply.tool_calls:
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{call_id}",
                "call_id": call_id,
                "name": name,
                "arguments": args,
                "status": "completed",
            }
        )
    return items


def responses_body(reply: Reply, *, rid: str, model: str, prompt_chars: int) -> dict[str, Any]:
    prompt, completion = usage_of(reply, prompt_chars)
    incomplete = reply.finish_reason == "length"
    return {
        "id": f"resp_{rid}",
        "object": "response",
        "created_at": 1_700_000_000,
        "model": model,
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "output": _responses_items(reply, rid),
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": reply.cached_tokens},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens_of(reply, completion)},
            "total_tokens": prompt + completion,
        },
    }


def responses_stream(reply: Reply, *, rid: str, model: str, prompt_chars: int) -> list[bytes]:
    final = responses_body(reply, rid=rid, model=model, prompt_chars=prompt_chars)
    frames: list[bytes] = []

    def emit(kind: str, **fields: Any) -> None:
        frames.append(event_frame(kind, {"type": kind, "sequence_number": len(frames), **fields}))

    opening = {**final, "status": "in_progress", "output": [], "usage": None}
    opening["incomplete_details"] = None
    emit("response.created", response=opening)
    emit("response.in_progress", response=opening)
    size = reply.chunk_chars
    for out_index, item in enumerate(final["output"]):
        iid = item["id"]
        if item["type"] == "reasoning":
            emit("response.output_item.added", output_index=out_index, item={**item, "content": []})
            for p in pieces(reply.reasoning, size):
                emit(
                    "response.reasoning_text.delta",
                    item_id=iid,
                    output_index=out_index,
                    content_index=0,
                    delta=p,
                )
            emit(
                "response.reasoning_text.done",
                item_id=iid,
                output_index=out_index,
                content_index=0,
                text=reply.reasoning,
            )
        elif item["type"] == "message":
            emit(
                "response.output_item.added",
                output_index=out_index,
                item={**item, "status": "in_progress", "content": []},
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            emit(
                "response.content_part.added",
                item_id=iid,
                output_index=out_index,
                content_index=0,
                part=part,
            )
            for p in pieces(reply.text, size):
                emit(
                    "response.output_text.delta",
                    item_id=iid,
                    output_index=out_index,
                    content_index=0,
                    delta=p,
                )
            emit(
                "response.output_text.done",
                item_id=iid,
                output_index=out_index,
                content_index=0,
                text=reply.text,
            )
            emit(
                "response.content_part.done",
                item_id=iid,
                output_index=out_index,
                content_index=0,
                part={**part, "text": reply.text},
            )
        else:
            emit(
                "response.output_item.added",
                output_index=out_index,
                item={**item, "arguments": "", "status": "in_progress"},
            )
            for p in pieces(item["arguments"], size):
                emit(
                    "response.function_call_arguments.delta",
                    item_id=iid,
                    output_index=out_index,
                    delta=p,
                )
            emit(
                "response.function_call_arguments.done",
                item_id=iid,
                output_index=out_index,
                arguments=item["arguments"],
            )
        emit("response.output_item.done", output_index=out_index, item=item)
    terminal = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    emit(terminal, response=final)
    return frames


def responses_error(message: str, status: int) -> dict[str, Any]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


# ---------------------------------------------------------------- Anthropic Messages

_ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def _anthropic_blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.reasoning:
        blocks.append({"type": "thinking", "thinking": reply.reasoning, "signature": "sig-fake"})
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    for call_id, name, args in reply.tool_calls:
        blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": json.loads(args)})
    return blocks


def anthropic_usage(reply: Reply, prompt_chars: int) -> dict[str, int]:
    prompt, completion = usage_of(reply, prompt_chars)
    return {
        "input_tokens": max(prompt - reply.cached_tokens, 0),
        "cache_read_input_tokens": reply.cached_tokens,
        "cache_creation_input_tokens": 0,
        "output_tokens": completion,
    }


def _anthropic_stop(reply: Reply) -> tuple[str, str | None]:
    if isinstance(reply.matched_stop, str):
        return "stop_sequence", reply.matched_stop
    return _ANTHROPIC_STOP.get(reply.finish_reason, reply.finish_reason), None


def anthropic_body(reply: Reply, *, rid: str, model: str, prompt_chars: int) -> dict[str, Any]:
    return {
        "id": f"msg_{rid}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _anthropic_blocks(reply),
        "stop_reason": _anthropic_stop(reply)[0],
        "stop_sequence": _anthropic_stop(reply)[1],
        "usage": anthropic_usage(reply, prompt_chars),
    }


def anthropic_stream(reply: Reply, *, rid: str, model: str, prompt_chars: int) -> list[bytes]:
    usage = anthropic_usage(reply, prompt_chars)
    start = anthropic_body(reply, rid=rid, model=model, prompt_chars=prompt_chars)
    start.update(content=[], stop_reason=None, usage={**usage, "output_tokens": 1})
    frames = [event_frame("message_start", {"type": "message_start", "message": start})]
    frames.append(event_frame("ping", {"type": "ping"}))

    def delta(index: int, body: dict[str, Any]) -> None:
        frames.append(
            event_frame(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": body},
            )
        )

    for index, block in enumerate(_anthropic_blocks(reply)):
        if block["type"] == "thinking":
            opening: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
        elif block["type"] == "text":
            opening = {"type": "text", "text": ""}
        else:
            opening = {**block, "input": {}}
        frames.append(
            event_frame(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opening},
            )
        )
        if block["type"] == "thinking":
            for p in pieces(reply.reasoning, reply.chunk_chars):
                delta(index, {"type": "thinking_delta", "thinking": p})
            delta(index, {"type": "signature_delta", "signature": block["signature"]})
        elif block["type"] == "text":
            for p in pieces(reply.text, reply.chunk_chars):
                delta(index, {"type": "text_delta", "text": p})
        else:
            args = next(a for i, _, a in reply.tool_calls if i == block["id"])
            for p in pieces(args, reply.chunk_chars):
                delta(index, {"type": "input_json_delta", "partial_json": p})
        frames.append(
            event_frame("content_block_stop", {"type": "content_block_stop", "index": index})
        )
    stop, stop_sequence = _anthropic_stop(reply)
    frames.append(
        event_frame(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": stop_sequence},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    frames.append(event_frame("message_stop", {"type": "message_stop"}))
    return frames


def anthropic_error(message: str, status: int) -> dict[str, Any]:
    kinds = {
        400: "invalid_request_error",
        401: "authentication_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }
    kind = kinds.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def in_stream_error(api: str) -> bytes:
    """The error a server sends inside a 200 stream, after the status line said all was well
    (docs/stream-cases.md lists how the client classifies it)."""
    if api == "chat":
        return data_frame(chat_error("Generation aborted.", 503)) + DONE
    if api == "responses":
        failed = {
            "id": "resp_err",
            "object": "response",
            "status": "failed",
            "error": {"code": "server_error", "message": "Generation aborted."},
        }
        return event_frame(
            "response.failed", {"type": "response.failed", "sequence_number": 0, "response": failed}
        )
    return event_frame(
        "error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
