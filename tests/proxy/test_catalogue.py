"""The stream edge-case catalogue (codes in docs/stream-cases.md) replayed byte for byte by
the fake upstream, read through every front by its real SDK to the end."""

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

DONE = b"data: [DONE]\n\n"


def chunk(delta: dict[str, Any] | None = None, finish: Any = None, **top: Any) -> bytes:
    body: dict[str, Any] = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "model": "g"}
    if delta is not None or finish is not None:
        choice: dict[str, Any] = {"index": 0, "delta": delta or {}}
        if finish is not None:
            choice["finish_reason"] = finish
        body["choices"] = [choice]
    body.update(top)
    return b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\n"


def tool(index: int | None, *, id: str | None = None, name: str | None = None, args: str = "")\
        -> dict[str, Any]:  # fmt: skip
    call: dict[str, Any] = {"function": {"arguments": args}}
    if index is not None:
        call["index"] = index
    if id is not None:
        call["id"], call["type"] = id, "function"
    if name is not None:
        call["function"]["name"] = name
    return call


ROLE = chunk({"role": "assistant", "content": ""})
USAGE = chunk(choices=[], usage={"prompt_tokens": 13312, "completion_tokens": 79,
                                 "prompt_tokens_details": {"cached_tokens": 100}})  # fmt: skip
BASH = [tool(0, id="tool-0924", name="Bash", args='{"command":"pwd"}')]

# name: (frames, expected (text, thinking, [(name, args)], stop) or "error")
CASES: dict[str, tuple[list[bytes], Any]] = {
    "E01_usage_tail": (
        [ROLE, chunk({"tool_calls": BASH}), chunk({}, "tool_calls"), USAGE, DONE],
        ("", "", [("Bash", {"command": "pwd"})], "tool_calls"),
    ),
    "E02_empty_tail_after_finish": (
        [
            chunk({"reasoning_content": "run it"}),
            chunk({"tool_calls": BASH}),
            chunk({}, "tool_calls"),
            chunk({}, None, usage={"prompt_tokens": 13312, "completion_tokens": 79}),
            DONE,
        ],
        ("", "run it", [("Bash", {"command": "pwd"})], "tool_calls"),
    ),
    "E03_duplicate_finish": (
        [
            chunk({"content": "ok"}),
            chunk({}, "stop"),
            chunk({}, "stop", usage={"prompt_tokens": 10, "completion_tokens": 5}),
            DONE,
        ],
        ("ok", "", [], "stop"),
    ),
    "E05_content_with_finish": (
        [chunk({"content": "Hel"}), chunk({"content": "lo"}, "stop"), DONE],
        ("Hello", "", [], "stop"),
    ),
    "E06_eof_after_finish": (
        [chunk({"content": "hello"}), chunk({}, "stop")],
        ("hello", "", [], "stop"),
    ),
    "E07_eof_without_finish": ([chunk({"content": "hello"})], "error"),
    "E08_done_without_finish": ([chunk({"content": "Hi"}), DONE], ("Hi", "", [], "stop")),
    "E10_after_finish": (
        [chunk({"content": "a"}), chunk({}, "stop"), chunk({"content": "b"}), DONE],
        ("a", "", [], "stop"),
    ),
    "E11_legacy_null_delta": (
        [
            chunk({"role": None, "content": None, "reasoning_content": "2", "tool_calls": None}),
            chunk({"role": None, "content": None, "reasoning_content": None, "tool_calls": None}),
            chunk({"role": None, "content": "four", "reasoning_content": None}),
            chunk({}, "stop"),
            DONE,
        ],
        ("four", "2", [], "stop"),
    ),
    "E12_empty_role": (
        [
            chunk({"role": "", "reasoning_content": ""}, usage={"total_tokens": 0}),
            chunk({"role": None, "content": "x"}),
            chunk({}, "stop"),
            DONE,
        ],
        ("x", "", [], "stop"),
    ),
    "E14_empty_tool_array": (
        [
            chunk({"reasoning_content": "用", "tool_calls": []}),
            chunk({"reasoning_content": "户", "tool_calls": []}),
            chunk({"content": "ok"}),
            chunk({}, "stop"),
            DONE,
        ],
        ("ok", "用户", [], "stop"),
    ),
    "E15_empty_finish_string": (
        [
            chunk({"reasoning_content": "r"}, ""),
            chunk({"content": "t"}, ""),
            chunk({}, "stop"),
            DONE,
        ],
        ("t", "r", [], "stop"),
    ),
    "E16_usage_every_chunk": (
        [
            chunk(
                {"reasoning_content": "Let"}, usage={"prompt_tokens": 812, "completion_tokens": 1}
            ),
            chunk({"content": "go"}, usage={"prompt_tokens": 812, "completion_tokens": 2}),
            chunk({}, "stop", usage={"prompt_tokens": 812, "completion_tokens": 57}),
            DONE,
        ],
        ("go", "Let", [], "stop"),
    ),
    "E17_reasoning_alias": (
        [chunk({"reasoning": "Need context. "}), chunk({"content": "A"}), chunk({}, "stop"), DONE],
        ("A", "Need context. ", [], "stop"),
    ),
    "E18_legacy_function_call": (
        [
            chunk({"function_call": {"name": "read_file", "arguments": '{"path":'}}),
            chunk({"function_call": {"arguments": '"a"}'}}),
            chunk({}, "function_call"),
            DONE,
        ],
        ("", "", [("read_file", {"path": "a"})], "tool_calls"),
    ),
    "E19_abort": ([chunk({"content": "par"}), chunk({}, "abort"), DONE], "error"),
    "E21_reasoning_then_text": (
        [
            chunk({"reasoning_content": "The user wants"}),
            chunk({"content": ""}),
            chunk({"content": "Done"}),
            chunk({}, "stop"),
            DONE,
        ],
        ("Done", "The user wants", [], "stop"),
    ),
    "E22_answer_in_reasoning": (
        [chunk({"reasoning_content": "The capital of France is Paris."}), chunk({}, "stop"), DONE],
        ("The capital of France is Paris.", "The capital of France is Paris.", [], "stop"),
    ),
    "E23_length_in_reasoning": (
        [chunk({"reasoning_content": "hmm"}), chunk({}, "length"), DONE],
        ("", "hmm", [], "length"),
    ),
    "E28_args_before_id": (
        [
            chunk({"tool_calls": [tool(0, args='{"a":')]}),
            chunk({"tool_calls": [tool(0, id="call_0", name="first_tool")]}),
            chunk({"tool_calls": [tool(0, args="1}")]}),
            chunk({}, "tool_calls"),
            DONE,
        ],
        ("", "", [("first_tool", {"a": 1})], "tool_calls"),
    ),
    "E29_interleaved_parallel": (
        [
            chunk({"tool_calls": [tool(0, id="call_0", name="first_tool")]}),
            chunk({"tool_calls": [tool(1, id="call_1", name="second_tool")]}),
            chunk({"tool_calls": [tool(1, args='{"b":2}')]}),
            chunk({"tool_calls": [tool(0, args='{"a":1}')]}),
            chunk({}, "tool_calls"),
            DONE,
        ],
        ("", "", [("first_tool", {"a": 1}), ("second_tool", {"b": 2})], "tool_calls"),
    ),
    "E30_no_index": (
        [
            chunk({"tool_calls": [tool(None, id="call_a", name="x", args="")]}),
            chunk({"tool_calls": [tool(None, args="{}")]}),
            chunk({"tool_calls": [tool(None, id="call_b", name="y", args="{}")]}),
            chunk({}, "tool_calls"),
            DONE,
        ],
        ("", "", [("x", {}), ("y", {})], "tool_calls"),
    ),
    "E31_empty_args": (
        [
            chunk({"tool_calls": [tool(0, id="call_8", name="now", args="")]}),
            chunk({}, "tool_calls"),
            DONE,
        ],
        ("", "", [("now", {})], "tool_calls"),
    ),
    "E32_tool_lost": ([chunk({"content": ""}), chunk({}, "tool_calls"), DONE], "error"),
    "E32_tool_lost_with_text": (
        [chunk({"content": "Sure."}), chunk({}, "tool_calls"), DONE],
        ("Sure.", "", [], "stop"),
    ),
    "E33_whitespace_runaway": (
        [
            chunk({"tool_calls": [tool(0, id="call_w", name="Bash", args='{"command": ')]}),
            *[chunk({"tool_calls": [tool(0, args=" " * 100)]}) for _ in range(8)],
            chunk({}, "tool_calls"),
            DONE,
        ],
        "error",
    ),
    "E35_mixed_chunk": (
        [
            chunk(
                {
                    "reasoning_content": "think",
                    "content": "Let me check.",
                    "tool_calls": [tool(0, id="call_1", name="Bash", args="{}")],
                }
            ),
            chunk({}, "tool_calls"),
            DONE,
        ],
        ("Let me check.", "think", [("Bash", {})], "tool_calls"),
    ),
    "E36_error_in_stream": (
        [
            chunk({"content": "x"}),
            b'data: {"error":{"message":"Generation aborted.","type":"ServiceUnavailable",'
            b'"code":503}}\n\n',
            DONE,
        ],
        "error",
    ),
    "E42_split_utf8": (
        [
            b'data: {"choices":[{"index":0,"delta":{"content":"\xe4\xbd',
            b'\xa0\xe5\xa5\xbd"}}]}\n\n',
            chunk({}, "stop"),
            DONE,
        ],
        ("你好", "", [], "stop"),
    ),
    "E43_line_separator": (
        [chunk({"content": "a\u2028b\u2029c"}), chunk({}, "stop"), DONE],
        ("a\u2028b\u2029c", "", [], "stop"),
    ),
    "E44_sse_variants": (
        [
            b": keepalive\r\n\r\n",
            b'event: message\r\ndata:{"choices":[{"index":0,"delta":',
            b'{"content":"v"}}]}\r\n\r\n',
            b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
            b"data: [DONE]",
        ],
        ("v", "", [], "stop"),
    ),
}


@pytest.fixture(scope="module")
def proxy() -> Iterator[ProxyServer]:
    replies = {name: Reply(raw_chunks=frames) for name, (frames, _) in CASES.items()}
    with proxied(by_user_text(replies), "chat") as (_, server):
        yield server


def _read(front: str, proxy: ProxyServer, case: str, stream: bool = True) -> Seen | None:
    try:
        seen = ask(front, proxy, stream=stream, user=case)
    except (anthropic.APIError, openai.APIError):
        return None
    return None if seen.stop == "failed" else seen


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_catalogue_case(proxy: ProxyServer, front: str, case: str, stream: bool) -> None:
    expected = CASES[case][1]
    seen = _read(front, proxy, case, stream)
    if expected == "error":
        assert seen is None, f"{case} must end in a protocol error, got {seen}"
        return
    assert seen is not None, f"{case} failed through {front}"
    text, thinking, tools, stop = expected
    assert seen.text == text
    assert seen.thinking == thinking
    assert [(name, args) for _, name, args in seen.tools] == tools
    assert all(call_id for call_id, _, _ in seen.tools)
    assert seen.stop == stop


def test_usage_tail_reaches_every_front(proxy: ProxyServer) -> None:
    """E01: the usage that arrives after the finish chunk is the usage the client reports."""
    for front in FRONTS:
        seen = _read(front, proxy, "E01_usage_tail")
        assert seen is not None
        assert (seen.input_tokens, seen.cached_tokens, seen.output_tokens) == (13312, 100, 79)


def test_the_non_streamed_answer_is_the_same(proxy: ProxyServer) -> None:
    for front in FRONTS:
        seen = ask(front, proxy, stream=False, user="E29_interleaved_parallel")
        assert [name for _, name, _ in seen.tools] == ["first_tool", "second_tool"]
        with pytest.raises((anthropic.APIError, openai.APIError)):
            ask(front, proxy, stream=False, user="E19_abort")
