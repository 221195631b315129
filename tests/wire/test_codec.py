"""Request encoding: deterministic bytes, parameters round trip, protocol mapping."""

from __future__ import annotations

import json

import pytest

from solver.wire import (
    Message,
    Request,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    UnsupportedRequest,
    decode_body,
    decode_stream,
    encode_request,
    fold_events,
    request_from_params,
    request_params,
)

TOOL = ToolSpec("calc", "evaluate", {"type": "object", "properties": {"x": {"type": "string"}}})
CONVERSATION = (
    Message.text("system", "Be exact."),
    Message.text("user", "Compute 2+2 with the tool."),
    Message(
        "assistant",
        (ThinkingPart("use calc", signature=""), ToolCallPart("call_1", "calc", '{"x":"2+2"}')),
    ),
    Message("tool", (ToolResultPart("call_1", "4"),)),
)
FULL = Request(
    model="glm-4.6",
    messages=CONVERSATION,
    max_tokens=512,
    temperature=0.6,
    top_p=0.95,
    stop=("</proof>",),
    seed=7,
    reasoning=True,
    tools=(TOOL,),
    tool_choice="auto",
    extra=(("cache_prompt", False),),
)


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_encoding_is_deterministic_compact_and_sorted(api: str) -> None:
    request = Request(model="m", messages=CONVERSATION, max_tokens=10, tools=(TOOL,))
    first = encode_request(api, request)  # type: ignore[arg-type]
    assert first == encode_request(api, request)  # type: ignore[arg-type]
    parsed = json.loads(first)
    assert list(parsed) == sorted(parsed)
    assert b": " not in first and b", " not in first


def test_params_round_trip_rebuilds_the_same_bytes() -> None:
    params = json.loads(json.dumps(request_params(FULL)))
    again = request_from_params(FULL.messages, params)
    assert again == FULL
    assert encode_request("chat", again) == encode_request("chat", FULL)


def test_chat_encoding_glm() -> None:
    body = json.loads(encode_request("chat", FULL))
    assert body["chat_template_kwargs"] == {"enable_thinking": True}
    assert body["stream_options"] == {"include_usage": True}
    assert body["stop"] == ["</proof>"] and body["seed"] == 7 and body["cache_prompt"] is False
    assistant = body["messages"][2]
    assert assistant["reasoning_content"] == "use calc"
    assert assistant["tool_calls"][0]["function"] == {"name": "calc", "arguments": '{"x":"2+2"}'}
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "4"}


def test_anthropic_encoding() -> None:
    request = Request(
        model="m",
        messages=CONVERSATION,
        max_tokens=4096,
        stop=("END",),
        reasoning=True,
        tools=(TOOL,),
        tool_choice="required",
    )
    body = json.loads(encode_request("anthropic", request))
    assert body["system"] == "Be exact."
    assert body["stop_sequences"] == ["END"]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 3072}
    assert body["tool_choice"] == {"type": "any"}
    assistant = body["messages"][1]
    # unsigned thinking is dropped (E27); the tool call becomes tool_use with parsed input
    assert assistant["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "calc", "input": {"x": "2+2"}}
    ]
    assert body["messages"][2]["content"][0]["tool_use_id"] == "call_1"
    signed = Message("assistant", (ThinkingPart("t", signature="EqQB"), TextPart("a")))
    kept = json.loads(encode_request("anthropic", Request("m", (signed,), 10)))
    assert kept["messages"][0]["content"][0] == {
        "type": "thinking",
        "thinking": "t",
        "signature": "EqQB",
    }


def test_responses_encoding_and_refusals() -> None:
    request = Request(model="m", messages=CONVERSATION, max_tokens=99, tools=(TOOL,))
    body = json.loads(encode_request("responses", request))
    assert body["max_output_tokens"] == 99
    kinds = [item.get("type") for item in body["input"]]
    assert kinds == ["message", "message", "function_call", "function_call_output"]
    with pytest.raises(UnsupportedRequest):
        encode_request("responses", Request("m", CONVERSATION, 9, stop=("x",)))
    with pytest.raises(UnsupportedRequest):
        encode_request("anthropic", Request("m", CONVERSATION, 9, seed=1))


def test_non_stream_bodies() -> None:
    chat = (
        b'{"id":"a","choices":[{"index":0,"message":{"role":"assistant","content":'
        b'"<think>hm</think>ok","tool_calls":[{"id":"c","type":"function","function":'
        b'{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}],'
        b'"usage":{"prompt_tokens":5,"completion_tokens":2}}'
    )
    done = fold_events(decode_body("chat", chat))
    assert (done.text, done.reasoning, done.finish_reason) == ("ok", "hm", "tool_calls")
    broken = fold_events(decode_body("anthropic", b"{not json"))
    assert broken.finish_reason == "error" and broken.raw_finish_reason == "malformed"


def test_recorded_bytes_decode_the_way_the_client_read_them() -> None:
    """E20 both ways: a JSON body recorded for a stream request, an SSE stream recorded for a
    non-stream request; audit and resume decode by the request's mode and must still agree."""
    body = (
        b'{"id":"a","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},'
        b'"finish_reason":"stop"}]}'
    )
    assert fold_events(decode_stream("chat", [b"\n", body[:9], body[9:]])).text == "hi"
    stream = (
        b'data: {"choices":[{"delta":{"content":"yo"}}]}\n\n'
        b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    )
    assert fold_events(decode_body("chat", stream)).text == "yo"


def test_anthropic_refuses_non_json_tool_arguments() -> None:
    broken = Message("assistant", (ToolCallPart("c", "f", "{not json"),))
    with pytest.raises(UnsupportedRequest, match="not JSON"):
        encode_request("anthropic", Request("m", (broken,), 10))


def test_the_matched_stop_string_is_kept_on_the_finish_event() -> None:
    from solver.wire.events import Finish

    def finish_of(api: str, chunks: list[bytes]) -> Finish:
        found = [e for e in decode_stream(api, chunks) if isinstance(e, Finish)]
        assert len(found) == 1
        return found[0]

    def chat(matched: str) -> list[bytes]:
        return [
            b'data: {"choices":[{"delta":{"content":"4"}}]}\n\n',
            b'data: {"choices":[{"delta":{},"finish_reason":"stop","matched_stop":%s}]}\n\n'
            % matched.encode(),
            b"data: [DONE]\n\n",
        ]

    assert finish_of("chat", chat('"</proof>"')).stop_sequence == "</proof>"
    # SGLang names an EOS token by its id: no stop string was matched
    assert finish_of("chat", chat("151336")).stop_sequence is None
    assert finish_of("chat", chat("null")).stop_sequence is None
    anthropic = [
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","usage":{}}}\n\n',
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
        b'"stop_sequence","stop_sequence":"</proof>"},"usage":{"output_tokens":1}}\n\n',
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    ]
    found = finish_of("anthropic", anthropic)
    assert (found.reason, found.stop_sequence) == ("stop", "</proof>")


# ---------------------------------------------------------------- bounded events

CHUNK = b'data: {"choices":[{"delta":{"content":"%s"}}]}\n\n'
FINISH = b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'


def test_an_event_past_the_limit_ends_the_stream_and_nothing_more_is_held() -> None:
    from solver.wire.codec import StreamDecoder
    from solver.wire.events import StreamError

    decoder = StreamDecoder("chat", max_event_bytes=1000)
    assert [type(e).__name__ for e in decoder.feed(CHUNK % b"ok")] == ["TextDelta"]
    assert decoder.feed(b'data: {"choices":[{"delta":{"content":"' + b"x" * 600) == []
    (error,) = decoder.feed(b"y" * 600)
    assert isinstance(error, StreamError) and error.kind == "malformed" and error.retryable
    assert "ran past 1000 bytes" in error.message
    assert decoder.finished and "event_too_large" in decoder.cases
    # what follows is neither decoded nor buffered, even an event's end
    assert decoder.feed(b"z" * 5000 + b'"}}]}\n\n' + FINISH) == []
    assert decoder._sse.pending == 0
    assert decoder.close() == []


def test_events_up_to_the_limit_decode_whole() -> None:
    from solver.wire.codec import StreamDecoder

    decoder = StreamDecoder("chat", max_event_bytes=1000)
    wire = CHUNK % (b"a" * 900) + FINISH
    events = []
    for start in range(0, len(wire), 7):  # in small reads, as a socket gives them
        events += decoder.feed(wire[start : start + 7])
    events += decoder.close()
    completion = fold_events(events)
    assert completion.text == "a" * 900 and completion.finish_reason == "stop"
    assert "event_too_large" not in decoder.cases


def test_garbage_after_a_finished_stream_is_not_an_error() -> None:
    from solver.wire.codec import StreamDecoder

    decoder = StreamDecoder("chat", max_event_bytes=1000)
    events = decoder.feed(CHUNK % b"done" + FINISH)
    events += decoder.feed(b"data: " + b"q" * 2000)
    events += decoder.close()
    completion = fold_events(events)
    assert completion.text == "done" and completion.finish_reason == "stop"
    assert "event_too_large" not in decoder.cases


def test_the_default_limit_takes_a_16_mb_event_and_refuses_one_held_past_32_mib() -> None:
    from solver.wire.codec import MAX_EVENT_BYTES, StreamDecoder

    assert MAX_EVENT_BYTES == 32 * 1024 * 1024

    def decode(size: int) -> list[object]:
        wire = CHUNK % (b"w" * size) + FINISH
        decoder = StreamDecoder("chat")
        events: list[object] = []
        for start in range(0, len(wire), 1 << 16):
            events += decoder.feed(wire[start : start + (1 << 16)])
        return events + decoder.close()

    assert fold_events(decode(16_000_000)).text == "w" * 16_000_000  # type: ignore[arg-type]
    # held past the limit before its end came (an end in the same read is let through)
    broken = fold_events(decode(MAX_EVENT_BYTES + (1 << 17)))  # type: ignore[arg-type]
    assert broken.finish_reason == "error" and broken.raw_finish_reason == "malformed"
