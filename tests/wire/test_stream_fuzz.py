"""Hypothesis: arbitrary splits and random chunk sequences raise nothing undocumented."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from solver.wire import Finish, StreamError, decode_stream, fold_events
from tests.wire.catalogue import ALL_CASES

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def cut(raw: bytes, points: list[int]) -> list[bytes]:
    edges = sorted({p % (len(raw) + 1) for p in points})
    pieces, last = [], 0
    for edge in edges:
        pieces.append(raw[last:edge])
        last = edge
    pieces.append(raw[last:])
    return pieces


@SETTINGS
@given(case=st.sampled_from(ALL_CASES), points=st.lists(st.integers(0, 10_000), max_size=12))
def test_any_split_gives_the_same_events(case: Any, points: list[int]) -> None:
    whole = list(decode_stream(case.api, [case.raw]))
    assert list(decode_stream(case.api, cut(case.raw, points))) == whole


scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=6)
delta_values = st.fixed_dictionaries(
    {},
    optional={
        "role": scalars,
        "content": scalars,
        "reasoning_content": scalars,
        "reasoning": scalars,
        "tool_calls": st.none()
        | st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "index": st.none() | st.integers(-1, 3),
                    "id": scalars,
                    "function": st.none()
                    | st.fixed_dictionaries(
                        {},
                        optional={
                            "name": scalars,
                            "arguments": scalars
                            | st.dictionaries(st.text(max_size=3), st.integers()),
                        },
                    ),
                },
            ),
            max_size=3,
        ),
        "function_call": st.none()
        | st.fixed_dictionaries({}, optional={"name": scalars, "arguments": scalars}),
    },
)
chat_chunks = st.fixed_dictionaries(
    {},
    optional={
        "id": scalars,
        "choices": st.none()
        | st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "delta": st.none() | delta_values,
                    "message": st.none() | delta_values,
                    "finish_reason": st.none()
                    | st.sampled_from(
                        ["", "stop", "length", "tool_calls", "abort", "function_call", "weird"]
                    ),
                },
            ),
            max_size=2,
        ),
        "usage": st.none()
        | st.fixed_dictionaries(
            {},
            optional={
                "prompt_tokens": scalars,
                "completion_tokens": scalars,
                "prompt_tokens_details": st.none()
                | st.fixed_dictionaries({}, optional={"cached_tokens": scalars}),
            },
        ),
        "error": st.none()
        | st.text(max_size=5)
        | st.fixed_dictionaries({}, optional={"message": scalars, "code": scalars}),
        "object": st.none() | st.sampled_from(["error", "chat.completion.chunk"]),
    },
)
junk = st.binary(max_size=40)
# nesting past every parser's limit (orjson stops at 1024, the stdlib parser recurses)
deep = st.builds(
    lambda depth, pair: b"data: " + pair[0] * depth + pair[1] * depth + b"\n\n",
    st.integers(1100, 20_000),
    st.sampled_from([(b"[", b"]"), (b'{"a":', b"}"), (b"[", b"")]),
)


def frame(item: Any) -> bytes:
    if isinstance(item, bytes):
        return item
    return b"data: " + json.dumps(item).encode() + b"\n\n"


@SETTINGS
@given(
    items=st.lists(chat_chunks | junk | deep | st.just(b"data: [DONE]\n\n"), max_size=12),
    points=st.lists(st.integers(0, 5000), max_size=6),
)
def test_random_chat_streams_end_in_exactly_one_terminal(
    items: list[Any], points: list[int]
) -> None:
    raw = b"".join(frame(i) for i in items)
    events = list(decode_stream("chat", cut(raw, points)))
    assert events and isinstance(events[-1], Finish | StreamError)
    assert sum(isinstance(e, Finish | StreamError) for e in events) == 1
    fold_events(events)


event_names = st.sampled_from(
    [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "message_delta",
        "message_stop",
        "error",
        "ping",
        "response.created",
        "response.output_text.delta",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.completed",
        "response.incomplete",
        "response.failed",
        "error",
    ]
)
loose = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "delta",
                    "index",
                    "text",
                    "usage",
                    "message",
                    "response",
                    "item",
                    "content_block",
                    "stop_reason",
                    "input_tokens",
                    "output",
                    "status",
                    "item_id",
                    "id",
                    "name",
                    "arguments",
                    "error",
                    "thinking",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@SETTINGS
@given(
    api=st.sampled_from(["anthropic", "responses"]),
    items=st.lists(st.tuples(event_names, loose), max_size=10),
    points=st.lists(st.integers(0, 5000), max_size=6),
)
def test_random_event_streams_end_in_exactly_one_terminal(
    api: Any, items: list[tuple[str, Any]], points: list[int]
) -> None:
    raw = b"".join(
        f"event: {name}\ndata: ".encode()
        + json.dumps({"type": name, **body} if isinstance(body, dict) else body).encode()
        + b"\n\n"
        for name, body in items
    )
    events = list(decode_stream(api, cut(raw, points)))
    assert events and isinstance(events[-1], Finish | StreamError)
    assert sum(isinstance(e, Finish | StreamError) for e in events) == 1
    fold_events(events)


chat_keys = st.sampled_from(
    [
        "choices",
        "delta",
        "content",
        "reasoning_content",
        "reasoning",
        "tool_calls",
        "function",
        "arguments",
        "name",
        "index",
        "id",
        "finish_reason",
        "usage",
        "prompt_tokens",
        "error",
        "object",
        "message",
        "code",
        "function_call",
        "prompt_tokens_details",
    ]
)
loose_chat = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(chat_keys, inner, max_size=4),
    max_leaves=16,
)


@SETTINGS
@given(items=st.lists(loose_chat, max_size=10), points=st.lists(st.integers(0, 5000), max_size=4))
def test_arbitrary_json_in_chat_streams(items: list[Any], points: list[int]) -> None:
    raw = b"".join(frame(i) if not isinstance(i, bytes) else i for i in items)
    events = list(decode_stream("chat", cut(raw, points)))
    assert events and isinstance(events[-1], Finish | StreamError)
    fold_events(events)


@SETTINGS
@given(
    api=st.sampled_from(["chat", "responses", "anthropic"]),
    nested=deep,
    points=st.lists(st.integers(0, 50_000), max_size=4),
)
def test_deep_nesting_is_malformed_in_every_protocol(
    api: Any, nested: bytes, points: list[int]
) -> None:
    events = list(decode_stream(api, cut(nested, points)))
    # malformed, or (a list the parser still took) a stream without a finish: never a crash
    assert isinstance(events[-1], StreamError)
    assert events[-1].kind in ("malformed", "eof_without_finish")
