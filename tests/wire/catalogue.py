"""The stream edge-case catalogue (codes in docs/stream-cases.md) as raw byte streams.

Each :class:`Case` is the exact bytes a server sent and what the canonical result must be.
Cases that concern emitters towards clients (E10, E25, E34, E39, E45-E46 emit side, E49, E50)
belong to the proxy; E09/E38/E40 are liveness and are tested against the fake endpoint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from solver.wire.events import Api, Usage


def sse(*objects: Any, done: bool = True) -> bytes:
    out = b"".join(
        b"data: " + json.dumps(o, ensure_ascii=False).encode() + b"\n\n" for o in objects
    )
    return out + (b"data: [DONE]\n\n" if done else b"")


def events(*pairs: tuple[str, dict[str, Any]]) -> bytes:
    frames = []
    for name, body in pairs:
        data = json.dumps({"type": name, **body}, ensure_ascii=False)
        frames.append(f"event: {name}\ndata: {data}\n\n".encode())
    return b"".join(frames)


def delta(d: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "glm"}
    return {**head, "choices": [{"index": 0, "delta": d, "finish_reason": finish}], **extra}


def usage_tail(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    }


ROLE = delta({"role": "assistant", "content": ""})


def call(index: int | None, id: str | None, name: str | None, args: str) -> dict[str, Any]:
    body: dict[str, Any] = {"function": {"arguments": args}}
    if index is not None:
        body["index"] = index
    if id is not None:
        body["id"] = id
        body["type"] = "function"
    if name is not None:
        body["function"]["name"] = name
    return body


@dataclass
class Case:
    code: str
    api: Api
    raw: bytes
    text: str = ""
    reasoning: str = ""
    tools: list[tuple[str, str, str]] = field(default_factory=list)
    finish: str = "stop"
    error_kind: str | None = None
    usage: Usage | None = None
    note: str = ""


CASES: list[Case] = [
    # ---------------------------------------------------------------- termination and tails
    Case(
        "E01",
        "chat",
        sse(
            ROLE,
            delta({"tool_calls": [call(0, "tool-0924", "Bash", '{"command":"pwd"}')]}),
            delta({}, "tool_calls"),
            usage_tail(13312, 79, 100),
        ),
        tools=[("tool-0924", "Bash", '{"command":"pwd"}')],
        finish="tool_calls",
        usage=Usage(input_tokens=13312, cached_tokens=100, output_tokens=79),
    ),
    Case(
        "E02",
        "chat",
        sse(
            {"choices": [{"delta": {"reasoning_content": "..."}}], "finish_reason": None},
            {"choices": [{"delta": {"tool_calls": [call(None, "tool-x", "Bash", "{}")]}}]},
            {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
            {
                "choices": [{"delta": {}}],
                "finish_reason": None,
                "usage": {"prompt_tokens": 13312, "completion_tokens": 79},
            },
        ),
        reasoning="...",
        tools=[("tool-x", "Bash", "{}")],
        finish="tool_calls",
        usage=Usage(input_tokens=13312, output_tokens=79),
    ),
    Case(
        "E03",
        "chat",
        sse(
            delta({"content": "ok"}),
            delta({}, "stop"),
            delta({}, "stop", usage={"prompt_tokens": 10, "completion_tokens": 5}),
        ),
        text="ok",
        usage=Usage(input_tokens=10, output_tokens=5),
    ),
    Case(
        "E04",
        "chat",
        sse(
            delta({"tool_calls": [call(0, "c1", "f", "{}")]}),
            {"choices": [{"finish_reason": "tool_calls", "delta": {}, "index": 0}]},
        ),
        tools=[("c1", "f", "{}")],
        finish="tool_calls",
    ),
    Case(
        "E05",
        "chat",
        sse(
            delta({"content": "Hel"}),
            delta({"content": "lo"}, "stop", usage={"prompt_tokens": 4, "completion_tokens": 2}),
        ),
        text="Hello",
        usage=Usage(input_tokens=4, output_tokens=2),
    ),
    Case(
        "E06",
        "chat",
        sse(delta({"content": "hello"}), delta({}, "stop"), done=False),
        text="hello",
    ),
    Case(
        "E07",
        "chat",
        sse(delta({"content": "hello"}), done=False),
        text="hello",
        finish="error",
        error_kind="eof_without_finish",
    ),
    Case("E08", "chat", sse(delta({"content": "Hi"})), text="Hi"),
    # ---------------------------------------------------------------- delta shapes
    Case(
        "E11",
        "chat",
        sse(
            delta({"role": None, "content": None, "reasoning_content": "2", "tool_calls": None}),
            delta({"role": None, "content": None, "reasoning_content": None, "tool_calls": None}),
            delta({"role": None, "content": "two", "reasoning_content": None}),
            delta({}, "stop"),
        ),
        reasoning="2",
        text="two",
    ),
    Case(
        "E12",
        "chat",
        sse(
            {
                "choices": [{"index": 0, "delta": {"role": "", "reasoning_content": ""}}],
                "usage": {"total_tokens": 0},
            },
            delta({"content": "a"}),
            delta({}, "stop"),
        ),
        text="a",
        usage=Usage(),
    ),
    Case("E13", "chat", sse(ROLE, delta({}, "stop")), finish="stop"),
    Case(
        "E14",
        "chat",
        sse(
            delta(
                {
                    "content": None,
                    "reasoning_content": "用户",
                    "role": "assistant",
                    "tool_calls": [],
                }
            ),
            delta(
                {"content": None, "reasoning_content": "用", "role": "assistant", "tool_calls": []}
            ),
            delta({"content": "好"}),
            delta({}, "stop"),
        ),
        reasoning="用户用",
        text="好",
    ),
    Case(
        "E15",
        "chat",
        sse(
            {"choices": [{"delta": {"reasoning_content": "r"}, "finish_reason": ""}]},
            {"choices": [{"delta": {"content": "t"}, "finish_reason": ""}]},
            delta({}, "stop"),
        ),
        reasoning="r",
        text="t",
    ),
    Case(
        "E16",
        "chat",
        sse(
            delta(
                {"reasoning_content": "Let"},
                usage={"prompt_tokens": 812, "completion_tokens": 1, "total_tokens": 813},
            ),
            delta(
                {"content": " me"},
                usage={"prompt_tokens": 812, "completion_tokens": 2, "total_tokens": 814},
            ),
            delta(
                {},
                "stop",
                usage={"prompt_tokens": 812, "completion_tokens": 57, "total_tokens": 869},
            ),
        ),
        reasoning="Let",
        text=" me",
        usage=Usage(input_tokens=812, output_tokens=57),
    ),
    Case(
        "E17",
        "chat",
        sse(delta({"reasoning": "Need context. "}), delta({"content": "ok"}), delta({}, "stop")),
        reasoning="Need context. ",
        text="ok",
    ),
    Case(
        "E18",
        "chat",
        sse(
            delta({"function_call": {"name": "read_file", "arguments": '{"path":'}}),
            delta({"function_call": {"arguments": '"a"}'}}),
            delta({}, "function_call"),
        ),
        tools=[("call_0", "read_file", '{"path":"a"}')],
        finish="tool_calls",
    ),
    Case(
        "E19",
        "chat",
        sse(delta({"content": "par"}), delta({}, "abort")),
        text="par",
        finish="abort",
        error_kind="abort",
    ),
    # ---------------------------------------------------------------- reasoning
    Case(
        "E21",
        "chat",
        sse(
            delta({"reasoning_content": "The user wants", "content": None}),
            delta({"reasoning_content": " a greeting.", "content": ""}),
            delta({"content": "Done"}),
            delta({}, "stop"),
        ),
        reasoning="The user wants a greeting.",
        text="Done",
    ),
    Case(
        "E22",
        "chat",
        sse(
            delta({"reasoning_content": "The capital of "}),
            delta({"reasoning_content": "France is Paris."}),
            delta({}, "stop"),
        ),
        reasoning="The capital of France is Paris.",
        text="The capital of France is Paris.",
    ),
    Case(
        "E23",
        "chat",
        sse(delta({"reasoning_content": "long thought"}), delta({}, "length")),
        reasoning="long thought",
        finish="length",
    ),
    Case(
        "E24",
        "chat",
        sse(
            delta({"reasoning_content": "I should list files.<tool_call>Bash<arg_key>c"}),
            delta({"reasoning_content": "</arg_key><arg_value>ls</arg_value></tool_call>"}),
            delta({}, "stop"),
        ),
        reasoning="I should list files.<tool_call>Bash<arg_key>c</arg_key>"
        "<arg_value>ls</arg_value></tool_call>",
        text="I should list files.<tool_call>Bash<arg_key>c</arg_key>"
        "<arg_value>ls</arg_value></tool_call>",
        note="parser leak is counted (E24_parser_leak), the text is kept verbatim",
    ),
    Case(
        "think-tags",
        "chat",
        sse(
            delta({"content": "<thi"}),
            delta({"content": "nk>step one"}),
            delta({"content": ", two</th"}),
            delta({"content": "ink>\n\nAnswer: 4 < 5"}),
            delta({}, "stop"),
        ),
        reasoning="step one, two",
        text="\n\nAnswer: 4 < 5",
    ),
    # ---------------------------------------------------------------- tool calls
    Case(
        "E28",
        "chat",
        sse(
            delta({"tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]}),
            delta({"tool_calls": [call(0, "call_0", "first_tool", "")]}),
            delta({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
            delta({}, "tool_calls"),
        ),
        tools=[("call_0", "first_tool", '{"a":1}')],
        finish="tool_calls",
    ),
    Case(
        "E29",
        "chat",
        sse(
            delta({"tool_calls": [call(0, "call_0", "first_tool", "")]}),
            delta({"tool_calls": [call(1, "call_1", "second_tool", "")]}),
            delta({"tool_calls": [call(1, None, None, '{"b":2}')]}),
            delta({"tool_calls": [call(0, None, None, '{"a":1}')]}),
            delta({}, "tool_calls"),
        ),
        tools=[("call_0", "first_tool", '{"a":1}'), ("call_1", "second_tool", '{"b":2}')],
        finish="tool_calls",
    ),
    Case(
        "E30",
        "chat",
        sse(
            delta({"tool_calls": [call(None, "call_a", "x", "")]}),
            delta({"tool_calls": [call(None, None, None, "{}")]}),
            delta({"tool_calls": [call(None, "call_b", "y", "{}")]}),
            delta({"tool_calls": [call(None, "call_b", None, "")]}),
            delta({}, "tool_calls"),
        ),
        tools=[("call_a", "x", "{}"), ("call_b", "y", "{}")],
        finish="tool_calls",
    ),
    Case(
        "E31",
        "chat",
        sse(
            delta({"tool_calls": [call(0, "call_8", "now", "")]}),
            delta({"tool_calls": [call(1, "call_9", "twice", '{"a":1}')]}),
            delta({"tool_calls": [call(1, None, None, '{"a":1}')]}),
            delta({}, "tool_calls"),
        ),
        tools=[("call_8", "now", "{}"), ("call_9", "twice", '{"a":1}')],
        finish="tool_calls",
    ),
    Case(
        "E32",
        "chat",
        sse(delta({"content": ""}), delta({}, "tool_calls")),
        finish="error",
        error_kind="tool_call_lost",
    ),
    Case(
        "E32-text",
        "chat",
        sse(delta({"content": "I'll check."}), delta({}, "tool_calls")),
        text="I'll check.",
    ),
    Case(
        "b3-stop-with-tool",
        "chat",
        sse(delta({"tool_calls": [call(0, "c", "f", "{}")]}), delta({}, "stop")),
        tools=[("c", "f", "{}")],
        finish="tool_calls",
    ),
    Case(
        "E35",
        "chat",
        sse(
            delta(
                {
                    "reasoning_content": "hm",
                    "content": "Let me check.",
                    "tool_calls": [call(0, "call_1", "Bash", "{}")],
                }
            ),
            delta({}, "tool_calls"),
        ),
        reasoning="hm",
        text="Let me check.",
        tools=[("call_1", "Bash", "{}")],
        finish="tool_calls",
    ),
    # ---------------------------------------------------------------- errors
    Case(
        "E36",
        "chat",
        sse(
            delta({"content": "x"}),
            {
                "error": {
                    "message": "Generation aborted.",
                    "type": "ServiceUnavailable",
                    "code": 503,
                }
            },
        ),
        text="x",
        finish="error",
        error_kind="server_error",
    ),
    Case(
        "E36-bare",
        "chat",
        sse({"object": "error", "message": "boom", "type": "BadRequestError", "code": 400}),
        finish="error",
        error_kind="server_error",
    ),
    Case(
        "malformed",
        "chat",
        b'data: {"choices":[{"delta":{"content":"x"\n\n' + sse(delta({}, "stop")),
        finish="error",
        error_kind="malformed",
    ),
    # ---------------------------------------------------------------- framing
    Case(
        "E42",
        "chat",
        sse(delta({"content": "你好，世界"}), delta({}, "stop")),
        text="你好，世界",
    ),
    Case(
        "E43",
        "chat",
        (
            "data: "
            + json.dumps(delta({"content": "a\u2028b\u2029c\u0085d"}), ensure_ascii=False)
            + "\n\n"
        ).encode()
        + sse(delta({}, "stop")),
        text="a\u2028b\u2029c\u0085d",
    ),
    Case(
        "E44",
        "chat",
        b": keep-alive\n\n"
        b'data:{"choices":[{"delta":{"content":"a"}}]}\r\n\r\n'
        b'event: message\ndata: {"choices":[{"delta":\ndata: {"content":"b"}}]}\n\n'
        b": ping\n"
        b'data: {"choices":[{"delta":{"content":"c"}}]}\n'
        b'data: {"choices":[{"delta":{"content":"d"}}]}\n\n'
        b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\r\r'
        b"data: [DONE]\n",
        text="abcd",
    ),
]

# ---------------------------------------------------------------- Anthropic Messages

ANTHROPIC_CASES: list[Case] = [
    Case(
        "anthropic-full",
        "anthropic",
        events(
            (
                "message_start",
                {
                    "message": {
                        "id": "msg_1",
                        "usage": {
                            "input_tokens": 30,
                            "cache_read_input_tokens": 70,
                            "cache_creation_input_tokens": 5,
                            "output_tokens": 1,
                        },
                    }
                },
            ),
            ("ping", {}),
            (
                "content_block_start",
                {"index": 0, "content_block": {"type": "thinking", "thinking": ""}},
            ),
            (
                "content_block_delta",
                {"index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}},
            ),
            (
                "content_block_delta",
                {"index": 0, "delta": {"type": "signature_delta", "signature": "EqQB"}},
            ),
            ("content_block_stop", {"index": 0}),
            ("content_block_start", {"index": 1, "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"index": 1, "delta": {"type": "text_delta", "text": "Hi"}}),
            ("content_block_stop", {"index": 1}),
            (
                "content_block_start",
                {
                    "index": 2,
                    "content_block": {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "calc",
                        "input": {},
                    },
                },
            ),
            (
                "content_block_delta",
                {"index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"x":'}},
            ),
            (
                "content_block_delta",
                {"index": 2, "delta": {"type": "input_json_delta", "partial_json": "2}"}},
            ),
            ("content_block_stop", {"index": 2}),
            (
                "message_delta",
                {"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 42}},
            ),
            ("message_stop", {}),
        ),
        reasoning="hmm",
        text="Hi",
        tools=[("toolu_1", "calc", '{"x":2}')],
        finish="tool_calls",
        usage=Usage(input_tokens=105, cached_tokens=70, output_tokens=42),
    ),
    Case(
        "E37",
        "anthropic",
        events(
            ("message_start", {"message": {"id": "m", "usage": {"input_tokens": 3}}}),
            ("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
        finish="error",
        error_kind="overloaded_error",
        usage=Usage(input_tokens=3),
    ),
    Case(
        "anthropic-eof",
        "anthropic",
        events(
            ("message_start", {"message": {"id": "m", "usage": {"input_tokens": 3}}}),
            ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "a"}}),
        ),
        text="a",
        finish="error",
        error_kind="eof_without_finish",
        usage=Usage(input_tokens=3),
    ),
    Case(
        "anthropic-max-tokens",
        "anthropic",
        events(
            ("message_start", {"message": {"id": "m", "usage": {"input_tokens": 3}}}),
            ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "ab"}}),
            (
                "message_delta",
                {"delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 2}},
            ),
            ("message_stop", {}),
        ),
        text="ab",
        finish="length",
        usage=Usage(input_tokens=3, output_tokens=2),
    ),
]

# ---------------------------------------------------------------- OpenAI Responses

_RESP_USAGE = {
    "input_tokens": 50,
    "input_tokens_details": {"cached_tokens": 20},
    "output_tokens": 9,
    "output_tokens_details": {"reasoning_tokens": 4},
}

RESPONSES_CASES: list[Case] = [
    Case(
        "responses-full",
        "responses",
        events(
            ("response.created", {"response": {"id": "resp_1", "status": "in_progress"}}),
            (
                "response.output_item.added",
                {"output_index": 0, "item": {"type": "reasoning", "id": "rs_1"}},
            ),
            ("response.reasoning_summary_text.delta", {"item_id": "rs_1", "delta": "why"}),
            (
                "response.output_item.added",
                {
                    "output_index": 1,
                    "item": {
                        "type": "function_call",
                        "id": "fc_1",
                        "call_id": "call_abc",
                        "name": "shell",
                        "arguments": "",
                    },
                },
            ),
            ("response.function_call_arguments.delta", {"item_id": "fc_1", "delta": '{"c":'}),
            ("response.function_call_arguments.delta", {"item_id": "fc_1", "delta": '"ls"}'}),
            (
                "response.function_call_arguments.done",
                {"item_id": "fc_1", "arguments": '{"c":"ls"}'},
            ),
            (
                "response.output_item.done",
                {
                    "output_index": 1,
                    "item": {"type": "function_call", "id": "fc_1", "call_id": "", "name": "shell"},
                },
            ),
            (
                "response.completed",
                {"response": {"id": "resp_1", "status": "completed", "usage": _RESP_USAGE}},
            ),
        ),
        reasoning="why",
        tools=[("call_abc", "shell", '{"c":"ls"}')],
        finish="tool_calls",
        usage=Usage(input_tokens=50, cached_tokens=20, output_tokens=9, reasoning_tokens=4),
        note="E47: the empty call_id of output_item.done does not overwrite call_abc",
    ),
    Case(
        "E46",
        "responses",
        events(
            ("response.created", {"response": {"id": "resp_2"}}),
            (
                "response.completed",
                {
                    "response": {
                        "id": "resp_2",
                        "status": "completed",
                        "output": [
                            {"type": "message", "content": [{"type": "output_text", "text": "hi"}]}
                        ],
                    }
                },
            ),
        ),
        text="hi",
    ),
    Case(
        "responses-incomplete",
        "responses",
        events(
            ("response.output_text.delta", {"item_id": "m", "delta": "par"}),
            (
                "response.incomplete",
                {
                    "response": {
                        "status": "incomplete",
                        "incomplete_details": {"reason": "max_output_tokens"},
                    }
                },
            ),
        ),
        text="par",
        finish="length",
    ),
    Case(
        "responses-failed",
        "responses",
        events(
            ("response.output_text.delta", {"item_id": "m", "delta": "x"}),
            (
                "response.failed",
                {
                    "response": {
                        "status": "failed",
                        "error": {"code": "server_error", "message": "boom"},
                    }
                },
            ),
        ),
        text="x",
        finish="error",
        error_kind="server_error",
    ),
]

ALL_CASES = CASES + ANTHROPIC_CASES + RESPONSES_CASES

CASES.append(
    Case(
        "E33",
        "chat",
        sse(
            delta({"tool_calls": [call(0, "c", "f", "{")]}),
            *[delta({"tool_calls": [call(0, None, None, " " * 50)]}) for _ in range(11)],
            delta({}, "tool_calls"),
        ),
        tools=[("c", "f", "{" + " " * 500)],
        finish="error",
        error_kind="runaway_arguments",
        note="whitespace runaway in tool arguments ends the stream instead of running on",
    )
)
ALL_CASES.append(CASES[-1])

CASES.append(
    Case(
        "orphan-close-think",
        "chat",
        sse(
            delta({"content": "Check small cases first."}),
            delta({"content": "</thi"}),
            delta({"content": "nk>\nThe answer is 4."}),
            delta({}, "stop"),
        ),
        reasoning="Check small cases first.",
        text="\nThe answer is 4.",
        note="GLM thinking without a reasoning parser: the opening tag is in the prompt",
    )
)
ALL_CASES.append(CASES[-1])
