"""The call's floor (``Request.min_tokens``) against the served context: a call the context
would cap below it is not sent; at or above it the call is capped as before."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from solver.llm import (
    Completion,
    ContextBelowFloor,
    ContextLengthExceeded,
    Endpoint,
    Message,
    ModelClient,
    Request,
    RetryPolicy,
    TransportError,
    encode_request,
    request_params,
)
from solver.testing import FakeEndpoint
from solver.testing.fake_endpoint import Fault, Reply
from tests.llm.recorder import Recorder

RETRIES = RetryPolicy(max_attempts=3, initial_wait=0.01, max_wait=0.05)
ANSWER = Reply(text="The answer is 2.", chunk_chars=4)
CONTEXT = 600


def request(*, max_tokens: int = 4000, min_tokens: int = 1) -> Request:
    messages = (Message.text("system", "Be exact."), Message.text("user", "What is 1+1?"))
    return Request(
        model="glm-fake", messages=messages, max_tokens=max_tokens, min_tokens=min_tokens
    )


def complete(
    fake: FakeEndpoint, req: Request, *, prompt: int | None = None
) -> tuple[Completion, Recorder]:
    """One call; ``prompt`` is what the client's token counter says (None: its estimate)."""
    recorder = Recorder()

    async def counted(_: Request) -> int:
        assert prompt is not None
        return prompt

    async def go() -> Completion:
        endpoint = Endpoint(fake.url, "chat", "glm-fake")
        counter = counted if prompt is not None else None
        async with ModelClient(endpoint, retry=RETRIES, prompt_tokens=counter) as client:
            return await client.complete(req, recorder)

    try:
        return asyncio.run(go()), recorder
    except TransportError as exc:
        exc.recorder = recorder  # type: ignore[attr-defined]
        raise


def test_a_prompt_leaving_less_than_the_floor_sends_nothing() -> None:
    with FakeEndpoint([], context_length=CONTEXT) as fake:
        with pytest.raises(ContextBelowFloor) as caught:
            complete(fake, request(min_tokens=64), prompt=590)
        assert fake.requests == []  # not one attempt, though the policy allows three
        fake.assert_consumed()
    error = caught.value
    assert error.recorder.starts == []  # type: ignore[attr-defined]
    assert not error.retryable
    assert (error.prompt_tokens, error.context_length, error.cap, error.floor) == (590, 600, 10, 64)
    assert str(error) == (
        "not sent: a prompt of 590 tokens (counted) in a context of 600 tokens leaves a cap "
        "of 10 output tokens, below the call's floor of 64 (min_tokens)"
    )


def test_a_prompt_filling_the_context_is_below_any_floor_above_one() -> None:
    with FakeEndpoint([], context_length=CONTEXT) as fake:
        with pytest.raises(ContextBelowFloor) as caught:
            complete(fake, request(min_tokens=2), prompt=700)
        assert fake.requests == []
    assert caught.value.cap == CONTEXT - 700  # no room at all, not a cap of one token
    assert "leaves a cap of 0 output tokens" in str(caught.value)


@pytest.mark.parametrize("floor", [1, 8, 10])
def test_at_or_above_the_floor_the_call_is_capped_as_before(floor: int) -> None:
    with FakeEndpoint([ANSWER], context_length=CONTEXT) as fake:
        completion, rec = complete(fake, request(min_tokens=floor), prompt=590)
        fake.assert_consumed()
    assert completion.text == ANSWER.text
    assert rec.starts[0].max_tokens_cap == 10
    assert fake.requests[0].json["max_tokens"] == 10


def test_the_default_floor_refuses_a_prompt_that_fills_the_context() -> None:
    # Issue 41: it was sent with max_tokens 1, and a run made a search of one-token answers.
    with FakeEndpoint([], context_length=CONTEXT) as fake:
        with pytest.raises(ContextBelowFloor):
            complete(fake, request(), prompt=700)
        assert fake.requests == []


def test_the_floor_bounds_only_a_cap_the_context_sets() -> None:
    # A call asking for fewer tokens than its floor (the engine's budget cap on resume) is
    # not capped by the context, so the floor has nothing to bound.
    with FakeEndpoint([ANSWER], context_length=CONTEXT) as fake:
        _, rec = complete(fake, request(max_tokens=5, min_tokens=64), prompt=590)
        fake.assert_consumed()
    assert rec.starts[0].max_tokens_cap is None
    assert fake.requests[0].json["max_tokens"] == 5


def test_the_estimate_is_named_when_no_counter_is_given() -> None:
    long = request(min_tokens=400)
    text = "x" * 1500  # about 500 tokens by the client's estimate of three bytes a token
    long = replace(long, messages=(Message.text("user", text),))
    with FakeEndpoint([], context_length=CONTEXT) as fake:
        with pytest.raises(ContextBelowFloor) as caught:
            complete(fake, long)
        assert fake.requests == []
    assert "tokens (estimated) in a context of 600 tokens" in str(caught.value)
    assert caught.value.cap < 400


SERVER_COUNT = (
    "Requested token count exceeds the model's maximum context length of 4096 tokens. You "
    "requested a total of 5000 tokens: 1000 tokens from the input messages and 4000 tokens "
    "for the completion."
)


def test_a_recap_below_the_floor_is_not_sent() -> None:
    # The estimate fitted; the server's exact count leaves 3096 tokens, below the floor.
    refused = Reply(fault=Fault(status=400, message=SERVER_COUNT))
    with FakeEndpoint([refused], context_length=4096) as fake:
        with pytest.raises(ContextBelowFloor) as caught:
            complete(fake, request(max_tokens=4000, min_tokens=3500))
        fake.assert_consumed()
        assert len(fake.requests) == 1  # the refused one; the recapped retry never left
    error = caught.value
    assert (error.prompt_tokens, error.cap, error.floor) == (1000, 3096, 3500)
    assert "1000 tokens (as the server counted)" in str(error)
    assert isinstance(error.__context__, ContextLengthExceeded)
    rec = error.recorder  # type: ignore[attr-defined]
    assert [e.error_kind for e in rec.ends] == ["context_length"]


def test_a_recap_at_the_floor_is_sent() -> None:
    refused = Reply(fault=Fault(status=400, message=SERVER_COUNT))
    with FakeEndpoint([refused, ANSWER], context_length=4096) as fake:
        completion, rec = complete(fake, request(max_tokens=4000, min_tokens=3096))
        fake.assert_consumed()
    assert completion.text == ANSWER.text
    assert [s.max_tokens_cap for s in rec.starts] == [None, 3096]


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_the_floor_is_neither_sent_nor_recorded(api: str) -> None:
    plain, floored = request(), request(min_tokens=77)
    assert encode_request(api, floored) == encode_request(api, plain)  # type: ignore[arg-type]
    assert request_params(floored) == request_params(plain)
    assert "min_tokens" not in request_params(floored)
