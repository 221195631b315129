"""Terminal, usage and tool cases of the catalogue for the Responses and Anthropic upstreams
(the Chat upstream has its own in test_catalogue.py), replayed byte for byte and read through
every front by its SDK, streamed and not."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from solver.proxy import ProxyServer
from solver.testing.fake_endpoint import Reply
from tests.proxy.helpers import FRONTS, Seen, ask, by_user_text, proxied


def ev(name: str, body: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps({'type': name, **body})}\n\n".encode()


# ---------------------------------------------------------------- Responses upstream

CREATED = ev("response.created", {"response": {"id": "r", "status": "in_progress", "output": []}})
R_USAGE = {"input_tokens": 40, "output_tokens": 11, "input_tokens_details": {"cached_tokens": 15},
           "output_tokens_details": {"reasoning_tokens": 3}}  # fmt: skip


def r_text(text: str) -> list[bytes]:
    item = {"type": "message", "id": "m1", "role": "assistant", "status": "in_progress",
            "content": []}  # fmt: skip
    part = {"type": "output_text", "text": "", "annotations": []}
    at = {"output_index": 0, "item_id": "m1", "content_index": 0}
    return [
        ev("response.output_item.added", {"output_index": 0, "item": item}),
        ev("response.content_part.added", {**at, "part": part}),
        ev("response.output_text.delta", {**at, "delta": text}),
    ]


def r_call(index: int, call_id: str, args: list[str]) -> list[bytes]:
    item = {"type": "function_call", "id": f"fc_{index}", "call_id": call_id,
            "name": "get_weather", "arguments": "", "status": "in_progress"}  # fmt: skip
    at = {"output_index": index, "item_id": f"fc_{index}"}
    done = {**item, "arguments": "".join(args), "status": "completed"}
    return [
        ev("response.output_item.added", {"output_index": index, "item": item}),
        *[ev("response.function_call_arguments.delta", {**at, "delta": a}) for a in args],
        ev("response.output_item.done", {"output_index": index, "item": done}),
    ]


def r_end(status: str, **extra: Any) -> bytes:
    kind = {"completed": "response.completed", "incomplete": "response.incomplete",
            "failed": "response.failed"}[status]  # fmt: skip
    return ev(kind, {"response": {"id": "r", "status": status, "output": [], **extra}})


# name: (frames, expected (text, [(name, args)], stop, usage (input, cached, output)) | "error")
RESPONSES: dict[str, tuple[list[bytes], Any]] = {
    "R_usage_completed": (
        [CREATED, *r_text("Hello."), r_end("completed", usage=R_USAGE)],
        ("Hello.", [], "stop", (40, 15, 11)),
    ),
    "R_length_incomplete": (
        [
            CREATED,
            *r_text("cut"),
            r_end("incomplete", incomplete_details={"reason": "max_output_tokens"}, usage=R_USAGE),
        ],
        ("cut", [], "length", (40, 15, 11)),
    ),
    "R_failed_after_text": (
        [CREATED, *r_text("par"), r_end("failed", error={"code": "server_error", "message": "x"})],
        "error",
    ),
    "R_truncated_no_terminal": ([CREATED, *r_text("par")], "error"),
    "R_parallel_fragmented_tools": (
        [
            CREATED,
            *r_call(0, "call_1", ['{"ci', 'ty":"Oslo"}']),
            *r_call(1, "call_2", ['{"city":', '"Lima"}']),
            r_end("completed", usage=R_USAGE),
        ],
        (
            "",
            [("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Lima"})],
            "tool_calls",
            (40, 15, 11),
        ),
    ),
}

# ---------------------------------------------------------------- Anthropic upstream


def a_start(input_tokens: int = 20, cached: int = 5) -> bytes:
    usage = {"input_tokens": input_tokens, "output_tokens": 1, "cache_read_input_tokens": cached}
    message = {"id": "msg", "type": "message", "role": "assistant", "content": [], "model": "c",
               "usage": usage}  # fmt: skip
    return ev("message_start", {"message": message})


def a_text(index: int, text: str) -> list[bytes]:
    return [
        ev("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}),
        ev("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": text}}),
        ev("content_block_stop", {"index": index}),
    ]


def a_tool(index: int, tool_id: str, parts: list[str]) -> list[bytes]:
    block = {"type": "tool_use", "id": tool_id, "name": "get_weather", "input": {}}
    return [
        ev("content_block_start", {"index": index, "content_block": block}),
        *[ev("content_block_delta", {"index": index,
                                     "delta": {"type": "input_json_delta", "partial_json": p}})
          for p in parts],
        ev("content_block_stop", {"index": index}),
    ]  # fmt: skip


def a_end(stop: str, output: int = 7, **usage: int) -> list[bytes]:
    delta = ev("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None},
                                 "usage": {"output_tokens": output, **usage}})  # fmt: skip
    return [delta, ev("message_stop", {})]


ANTHROPIC: dict[str, tuple[list[bytes], Any]] = {
    "A_usage_split": (
        [a_start(), *a_text(0, "Hi."), *a_end("end_turn")],
        ("Hi.", [], "stop", (25, 5, 7)),
    ),
    # a server that repeats the input count in message_delta (cumulative, not added twice)
    "A_usage_repeated_in_delta": (
        [a_start(), *a_text(0, "Hi."), *a_end("end_turn", input_tokens=20)],
        ("Hi.", [], "stop", (25, 5, 7)),
    ),
    "A_max_tokens": (
        [a_start(), *a_text(0, "cut"), *a_end("max_tokens")],
        ("cut", [], "length", (25, 5, 7)),
    ),
    "A_truncated_no_message_delta": ([a_start(), *a_text(0, "par")], "error"),
    "A_parallel_fragmented_tools": (
        [
            a_start(),
            *a_text(0, "Two."),
            *a_tool(1, "toolu_1", ['{"city":', '"Oslo"}']),
            *a_tool(2, "toolu_2", ['{"ci', 'ty":"Lima"}']),
            *a_end("tool_use"),
        ],
        (
            "Two.",
            [("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Lima"})],
            "tool_calls",
            (25, 5, 7),
        ),
    ),
    "A_tool_without_input": (
        [a_start(), *a_tool(0, "toolu_3", []), *a_end("tool_use")],
        ("", [("get_weather", {})], "tool_calls", (25, 5, 7)),
    ),
}

CASES = {"responses": RESPONSES, "anthropic": ANTHROPIC}


@pytest.fixture(scope="module", params=sorted(CASES))
def upstream(request: pytest.FixtureRequest) -> Iterator[tuple[str, ProxyServer]]:
    replies = {name: Reply(raw_chunks=frames) for name, (frames, _) in CASES[request.param].items()}
    with proxied(by_user_text(replies), request.param) as (_, proxy):
        yield request.param, proxy


def _read(front: str, proxy: ProxyServer, case: str, stream: bool) -> Seen | None:
    try:
        seen = ask(front, proxy, stream=stream, user=case)
    except (anthropic.APIError, openai.APIError):
        return None
    return None if seen.stop == "failed" else seen


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("front", FRONTS)
def test_upstream_catalogue(upstream: tuple[str, ProxyServer], front: str, stream: bool) -> None:
    api, proxy = upstream
    for case, (_, expected) in CASES[api].items():
        seen = _read(front, proxy, case, stream)
        if expected == "error":
            assert seen is None, f"{case} must end in a protocol error, got {seen}"
            continue
        assert seen is not None, f"{case} failed through {front}"
        text, tools, stop, usage = expected
        assert seen.text == text, case
        assert [(name, args) for _, name, args in seen.tools] == tools, case
        assert all(call_id for call_id, _, _ in seen.tools), case
        assert seen.stop == stop, case
        assert (seen.input_tokens, seen.cached_tokens, seen.output_tokens) == usage, case
