"""Inline ``<think>`` tags become reasoning in the live events (what the proxy reads), not only in
the folded completion, and only where they can mean reasoning (b.1)."""

from __future__ import annotations

import asyncio

import pytest

from solver.llm import (
    Completion,
    Endpoint,
    Message,
    ModelClient,
    ReasoningDelta,
    Request,
    StreamError,
    StreamEvent,
    TextDelta,
    decode_stream,
    fold_events,
)
from solver.testing import FakeEndpoint
from solver.testing.fake_endpoint import Reply
from tests.llm.recorder import Recorder
from tests.wire.catalogue import ROLE, call, delta, sse
from tests.wire.catalogue import events as anthropic_events


def split_everywhere(raw: bytes, reasoning: bool | None = True) -> list[list[StreamEvent]]:
    """The events of ``raw`` whole and cut at every byte boundary, for a request that asked
    for reasoning unless told otherwise."""
    out = [list(decode_stream("chat", [raw], reasoning=reasoning))]
    for cut in range(1, len(raw)):
        out.append(list(decode_stream("chat", [raw[:cut], raw[cut:]], reasoning=reasoning)))
    return out


def deltas(events: list[StreamEvent]) -> tuple[str, str]:
    """All reasoning and all text as emitted, event by event."""
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    return reasoning, text


def test_lone_closing_tag_splits_the_live_events() -> None:
    # GLM thinking without a reasoning parser: <think> was the end of the prompt
    raw = sse(
        ROLE,
        delta({"content": "Check small"}),
        delta({"content": " cases first.</thi"}),
        delta({"content": "nk>\nThe answer is 4."}),
        delta({}, "stop"),
    )
    for events in split_everywhere(raw):
        assert deltas(events) == ("Check small cases first.", "\nThe answer is 4.")


@pytest.mark.parametrize("reasoning", [False, None])
def test_without_reasoning_asked_a_plain_answer_streams_and_the_fold_still_splits(
    reasoning: bool | None,
) -> None:
    """Holding text for a possible lone </think> would keep every plain answer from streaming,
    so it is done only when the request asked for reasoning; the completion is the same."""
    plain = sse(
        ROLE, delta({"content": "The answer"}), delta({"content": " is 4."}), delta({}, "stop")
    )
    for events in split_everywhere(plain, reasoning):
        assert deltas(events) == ("", "The answer is 4.")
    first = next(
        iter(decode_stream("chat", [plain[: plain.index(b" is 4.")]], reasoning=reasoning))
    )
    assert first == TextDelta("The answer")  # out before the stream ends
    orphan = sse(
        ROLE, delta({"content": "Check.</think>"}), delta({"content": "4"}), delta({}, "stop")
    )
    held = fold_events(decode_stream("chat", [orphan], reasoning=True), reasoning=True)
    streamed = fold_events(
        decode_stream("chat", [orphan], reasoning=reasoning), reasoning=reasoning
    )
    if reasoning is None:
        assert (streamed.reasoning, streamed.text) == (held.reasoning, held.text) == ("Check.", "4")
    else:  # thinking off: the template closed <think></think>, the tag is the answer's
        assert (streamed.reasoning, streamed.text) == ("", "Check.</think>4")


def test_with_reasoning_off_a_lone_close_tag_is_text_in_every_replay() -> None:
    """The live client, the resume replay and the audit replay all fold with the request's
    reasoning, so with it off they keep a literal </think> where the answer had it."""
    orphan = sse(ROLE, delta({"content": "Use </think> to close."}), delta({}, "stop"))
    folded = fold_events(decode_stream("chat", [orphan], reasoning=False), reasoning=False)
    assert (folded.reasoning, folded.text) == ("", "Use </think> to close.")
    default = fold_events(decode_stream("chat", [orphan]))
    assert (default.reasoning, default.text) == ("Use ", " to close.")


@pytest.mark.parametrize(
    "content",
    ["Use the tag <think> in HTML, then </think>.", "</think> closes it.", "<think>x</think>y"],
)
def test_tags_after_a_reasoning_channel_stay_text(content: str) -> None:
    raw = sse(
        ROLE,
        delta({"reasoning_content": "Think about HTML."}),
        delta({"content": content[:9]}),
        delta({"content": content[9:]}),
        delta({}, "stop"),
    )
    for events in split_everywhere(raw):
        assert deltas(events) == ("Think about HTML.", content)


def test_a_tag_that_does_not_lead_stays_text() -> None:
    content = "Write <think>x</think> here."
    raw = sse(
        ROLE, delta({"content": content[:8]}), delta({"content": content[8:]}), delta({}, "stop")
    )
    for events in split_everywhere(raw):
        assert deltas(events) == ("", content)


def test_leading_tag_after_blank_text_is_reasoning_and_later_tags_are_text() -> None:
    raw = sse(
        ROLE,
        delta({"content": "\n<think>a"}),
        delta({"content": "b</think>c <think>d</think>"}),
        delta({}, "stop"),
    )
    for events in split_everywhere(raw):
        assert deltas(events) == ("ab", "c <think>d</think>")


def test_held_text_is_released_as_text_at_a_tool_call() -> None:
    raw = sse(
        ROLE,
        delta({"content": "Let me look."}),
        delta({"tool_calls": [call(0, "call_1", "ls", "{}")]}),
        delta({}, "tool_calls"),
    )
    for events in split_everywhere(raw):
        assert deltas(events) == ("", "Let me look.")
        completion = fold_events(events)
        assert completion.finish_reason == "tool_calls" and len(completion.tool_calls) == 1
        first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
        assert all(not isinstance(e, TextDelta) for e in events[first_text + 1 :])


@pytest.mark.parametrize(
    ("raw_reason", "kind"), [("error", "server_error"), ("cancelled", "abort")]
)
def test_error_and_cancelled_finishes_are_retryable_errors(raw_reason: str, kind: str) -> None:
    raw = sse(ROLE, delta({"content": "Half an ans"}), delta({}, raw_reason))
    events = list(decode_stream("chat", [raw]))
    terminal = events[-1]
    assert isinstance(terminal, StreamError)
    assert (terminal.kind, terminal.retryable) == (kind, True)
    assert fold_events(events).finish_reason != "stop"


def test_anthropic_pause_turn_is_not_a_plain_stop() -> None:
    raw = anthropic_events(
        ("message_start", {"message": {"id": "msg_1", "usage": {"input_tokens": 3}}}),
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "Part"}}),
        ("message_delta", {"delta": {"stop_reason": "pause_turn"}, "usage": {"output_tokens": 1}}),
        ("message_stop", {}),
    )
    completion = fold_events(decode_stream("anthropic", [raw]))
    assert completion.text == "Part"
    assert (completion.finish_reason, completion.raw_finish_reason) == ("length", "pause_turn")


@pytest.mark.parametrize("reasoning", [False, None])
def test_the_live_client_folds_with_the_requests_reasoning(reasoning: bool | None) -> None:
    """The live client's completion equals the replay's for the same recorded reasoning."""

    async def go() -> Completion:
        endpoint = Endpoint(fake.url + "/v1", "chat", "glm-fake")
        request = Request(
            model="glm-fake",
            messages=(Message.text("user", "how?"),),
            max_tokens=64,
            reasoning=reasoning,
        )
        async with ModelClient(endpoint) as client:
            return await asyncio.wait_for(client.complete(request, Recorder()), 30)

    with FakeEndpoint([Reply(text="Use </think> to close.")]) as fake:
        live = asyncio.run(go())
    expected = ("", "Use </think> to close.") if reasoning is False else ("Use ", " to close.")
    assert (live.reasoning, live.text) == expected
