"""The client against the fake endpoint with injected faults: right error, bounded waits."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from solver.llm import (
    Completion,
    ContextLengthExceeded,
    Deadlines,
    Endpoint,
    EndpointUnreachable,
    FirstByteTimeout,
    HTTPStatusError,
    IdleTimeout,
    Message,
    ModelClient,
    Request,
    RetryPolicy,
    StreamProtocolError,
    TotalTimeout,
    decode_stream,
    fold_events,
)
from solver.testing import FakeEndpoint
from solver.testing.fake_endpoint import Fault, Reply
from tests.llm.recorder import Recorder

FAST = RetryPolicy(max_attempts=3, initial_wait=0.01, max_wait=0.05)
ONCE = RetryPolicy(max_attempts=1)
QUICK = Deadlines(connect=2, first_byte=5, idle=5, total=20)
ANSWER = Reply(reasoning="Two odd squares.", text="The answer is 2.", chunk_chars=4)
APIS = ["chat", "responses", "anthropic"]


def request(*, stream: bool = True, max_tokens: int = 256, **kw: Any) -> Request:
    messages = (Message.text("system", "Be exact."), Message.text("user", "What is 1+1?"))
    return Request(model="glm-fake", messages=messages, max_tokens=max_tokens, stream=stream, **kw)


def run(
    fake: FakeEndpoint,
    *,
    api: str = "chat",
    deadlines: Deadlines = QUICK,
    retry: RetryPolicy = FAST,
    req: Request | None = None,
    api_key: str | None = None,
    then: Callable[[ModelClient], Awaitable[None]] | None = None,
) -> tuple[Completion, Recorder]:
    recorder = Recorder()

    async def go() -> Completion:
        endpoint = Endpoint(fake.url, api, "glm-fake", api_key=api_key)  # type: ignore[arg-type]
        async with ModelClient(endpoint, deadlines=deadlines, retry=retry) as client:
            return await client.complete(req or request(), recorder)

    try:
        return asyncio.run(go()), recorder
    except BaseException as exc:
        exc.recorder = recorder  # type: ignore[attr-defined]
        raise


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", [True, False])
def test_plain_answer_every_protocol(api: str, stream: bool) -> None:
    with FakeEndpoint([ANSWER]) as fake:
        completion, rec = run(fake, api=api, req=request(stream=stream))
        fake.assert_consumed()
    assert completion.text == "The answer is 2."
    assert completion.reasoning == "Two odd squares."
    assert completion.finish_reason == "stop"
    assert completion.usage.input_tokens > 0 and completion.usage.output_tokens > 0
    (start,), (end,) = rec.starts, rec.ends
    sent = fake.requests[0]
    assert sent.body == start.body  # the recorded bytes are the bytes that left
    assert sent.headers["x-request-id"] == start.request_id
    raw = rec.sinks[0].getvalue()
    assert hashlib.sha256(raw).hexdigest() == end.response_sha256
    assert end.response_bytes == len(raw) > 0
    assert end.status == 200 and end.error_kind is None and end.retry_index == 0
    assert end.ttfb_s is not None and end.ttft_s is not None and end.total_s >= end.ttft_s
    assert end.finish_reason == "stop"
    if stream:
        assert fold_events(decode_stream(api, [raw])) == completion  # type: ignore[arg-type]
    assert [c.address.split(":")[0] for c in rec.connections] == ["127.0.0.1"]


def test_stall_mid_stream_is_an_idle_timeout_and_is_retried() -> None:
    stalled = Reply(text="x" * 40, chunk_chars=4, fault=Fault(stall_after_chunks=3))
    deadlines = Deadlines(connect=2, first_byte=5, idle=0.3)
    with FakeEndpoint([stalled, ANSWER]) as fake:
        began = time.monotonic()
        completion, rec = run(fake, deadlines=deadlines)
        assert time.monotonic() - began < 30  # did not hang on the stall
        fake.assert_consumed()
    assert completion.text == ANSWER.text
    assert [e.error_kind for e in rec.ends] == ["idle_timeout", None]
    assert rec.ends[0].retryable and rec.ends[1].retry_index == 1


def test_stall_without_retries_raises_idle_timeout() -> None:
    stalled = Reply(text="x" * 40, fault=Fault(stall_after_chunks=2))
    with FakeEndpoint([stalled]) as fake, pytest.raises(IdleTimeout):
        began = time.monotonic()
        try:
            # the idle deadline, not the far longer first-byte one, ends a mid-stream stall
            run(fake, deadlines=Deadlines(first_byte=120, idle=0.3), retry=ONCE)
        finally:
            assert time.monotonic() - began < 60


def test_slow_prefill_within_first_byte_deadline_is_fine_even_with_short_idle() -> None:
    # the idle deadline is well under the prefill yet long enough that a loaded CI machine
    # never stretches the gap between two frames of the burst that follows past it
    slow = Reply(text="late but fine", fault=Fault(prefill_delay=1.5))
    with FakeEndpoint([slow]) as fake:
        completion, _ = run(fake, deadlines=Deadlines(first_byte=10, idle=0.5), retry=ONCE)
    assert completion.text == "late but fine"


def test_prefill_past_first_byte_deadline() -> None:
    slow = Reply(text="never", fault=Fault(prefill_delay=30))
    with FakeEndpoint([slow]) as fake:
        began = time.monotonic()
        with pytest.raises(FirstByteTimeout) as caught:
            run(fake, deadlines=Deadlines(first_byte=0.3, idle=60), retry=ONCE)
        assert time.monotonic() - began < 20
    assert caught.value.retryable
    assert caught.value.recorder.ends[0].status is None  # type: ignore[attr-defined]


def test_total_deadline() -> None:
    dribble = Reply(text="y" * 400, chunk_chars=1, chunk_delay=0.05)
    with FakeEndpoint([dribble]) as fake, pytest.raises(TotalTimeout):
        run(fake, deadlines=Deadlines(first_byte=5, idle=5, total=0.5), retry=FAST)


def test_connection_reset_is_retried() -> None:
    reset = Reply(text="z" * 40, fault=Fault(reset_after_chunks=2))
    with FakeEndpoint([reset, ANSWER]) as fake:
        completion, rec = run(fake)
        fake.assert_consumed()
    assert completion.text == ANSWER.text
    assert rec.ends[0].error_kind == "connection_lost"


def test_reset_without_retries_is_a_stream_protocol_error() -> None:
    reset = Reply(text="z" * 40, fault=Fault(reset_after_chunks=2))
    with FakeEndpoint([reset]) as fake, pytest.raises(StreamProtocolError) as caught:
        run(fake, retry=ONCE)
    assert caught.value.kind == "connection_lost" and caught.value.retryable


@pytest.mark.parametrize("api", APIS)
def test_truncated_body_is_eof_without_finish(api: str) -> None:
    cut = Reply(text="w" * 40, fault=Fault(truncate_after_chunks=3))
    with FakeEndpoint([cut]) as fake, pytest.raises(StreamProtocolError) as caught:
        run(fake, api=api, retry=ONCE)
    assert caught.value.kind == "eof_without_finish"


def test_malformed_json() -> None:
    bad = Reply(text="v" * 40, fault=Fault(malformed_json_after_chunks=2))
    with FakeEndpoint([bad]) as fake, pytest.raises(StreamProtocolError) as caught:
        run(fake, retry=ONCE)
    assert caught.value.kind == "malformed"


@pytest.mark.parametrize("api", APIS)
def test_error_object_mid_stream(api: str) -> None:
    broken = Reply(text="u" * 40, fault=Fault(error_event_after_chunks=3))
    with FakeEndpoint([broken, ANSWER]) as fake:
        completion, rec = run(fake, api=api)
        fake.assert_consumed()
    assert completion.text == ANSWER.text
    assert rec.ends[0].error_kind in ("server_error", "overloaded_error")


@pytest.mark.parametrize("status", [408, 409, 429, 500, 503])
def test_retryable_statuses(status: int) -> None:
    with FakeEndpoint([Reply(fault=Fault(status=status, retry_after=0)), ANSWER]) as fake:
        completion, rec = run(fake)
        fake.assert_consumed()
    assert completion.text == ANSWER.text
    assert rec.ends[0].status == status and rec.ends[0].error_kind == "http_status"


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_final_statuses_are_not_retried(status: int) -> None:
    with FakeEndpoint([Reply(fault=Fault(status=status))]) as fake:
        with pytest.raises(HTTPStatusError) as caught:
            run(fake)
        fake.assert_consumed()  # exactly one request: no retry
    assert caught.value.status == status and not caught.value.retryable


def test_context_length_error_is_not_retried_blindly() -> None:
    too_long = Fault(status=400, message="This model's maximum context length is 4096 tokens.")
    with FakeEndpoint([Reply(fault=too_long)]) as fake:
        with pytest.raises(ContextLengthExceeded):
            run(fake)
        fake.assert_consumed()


# A context-length error that says the prompt's size, which the client recaps from
PROMPT_TOO_LONG = (
    "Requested token count exceeds the model's maximum context length of 4096 "
    "tokens. You requested a total of 5000 tokens: 1000 tokens from the input "
    "messages and 4000 tokens for the completion."
)


def test_context_length_error_with_prompt_size_recaps_once() -> None:
    replies = [Reply(fault=Fault(status=400, message=PROMPT_TOO_LONG)), ANSWER]
    with FakeEndpoint(replies, context_length=4096) as fake:
        completion, rec = run(fake, req=request(max_tokens=4000))
        fake.assert_consumed()
    assert completion.text == ANSWER.text
    assert rec.starts[1].max_tokens_cap == 3096
    assert fake.requests[1].json["max_tokens"] == 3096


def test_a_recap_fits_the_thinking_budget_to_the_lower_cap() -> None:
    replies = [Reply(fault=Fault(status=400, message=PROMPT_TOO_LONG)), ANSWER]
    with FakeEndpoint(replies, context_length=4096, owned_by="sglang") as fake:
        _, rec = run(fake, req=request(max_tokens=4000, thinking_budget=3900))
        fake.assert_consumed()
    # the 100 tokens of room the configuration left stay for the answer under the lower cap
    first, second = (r.json["custom_params"]["thinking_budget"] for r in fake.requests)
    assert (first, second) == (3900, 2996)
    assert rec.starts[1].request.thinking_budget == 2996


def test_max_tokens_capped_by_served_context() -> None:
    with FakeEndpoint([ANSWER], context_length=2048) as fake:
        _, rec = run(fake, req=request(max_tokens=100_000))
    cap = rec.starts[0].max_tokens_cap
    assert cap is not None and 1900 < cap < 2048
    assert fake.requests[0].json["max_tokens"] == cap == rec.starts[0].request.max_tokens


def test_no_cap_when_it_fits_or_context_unknown() -> None:
    with FakeEndpoint([ANSWER, ANSWER], context_length=None) as fake:
        _, rec = run(fake, req=request(max_tokens=100_000))
        _, rec_small = run(fake, req=request(max_tokens=64))
    assert rec.starts[0].max_tokens_cap is None
    assert fake.requests[0].json["max_tokens"] == 100_000
    assert rec_small.starts[0].max_tokens_cap is None


def test_unreachable_endpoint() -> None:
    with FakeEndpoint([]) as fake:
        url = fake.url
    # the port is closed now: connection refused on loopback
    recorder = Recorder()

    async def go() -> None:
        async with ModelClient(Endpoint(url, "chat", "m"), retry=FAST) as client:
            await client.complete(request(), recorder)

    with pytest.raises(EndpointUnreachable):
        asyncio.run(go())
    assert len(recorder.ends) == FAST.max_attempts
    assert all(e.error_kind == "connect" for e in recorder.ends)


def test_api_key_never_in_errors_or_repr() -> None:
    secret = "sk-very-secret-123"
    fault = Fault(status=401, message=f"invalid key {secret}")
    with FakeEndpoint([Reply(fault=fault)]) as fake:
        with pytest.raises(HTTPStatusError) as caught:
            run(fake, api_key=secret)
        assert fake.requests[0].headers["authorization"] == f"Bearer {secret}"
    assert secret not in str(caught.value) and secret not in caught.value.body_excerpt
    ended = caught.value.recorder.ends[0]  # type: ignore[attr-defined]
    assert secret not in (ended.error_message or "")
    assert secret not in repr(Endpoint("http://127.0.0.1:1", "chat", "m", api_key=secret))


def test_outside_cancellation_propagates() -> None:
    stalled = Reply(text="x" * 40, fault=Fault(stall_after_chunks=2))
    recorder = Recorder()
    with FakeEndpoint([stalled]) as fake:

        async def go() -> None:
            endpoint = Endpoint(fake.url, "chat", "m")
            async with ModelClient(endpoint, deadlines=QUICK, retry=ONCE) as client:
                task = asyncio.create_task(client.complete(request(), recorder))
                # mid-stream: bytes arrived (plain text with no reasoning channel is held
                # back as possible orphan reasoning, so events need not have come yet)
                while not (recorder.sinks and recorder.sinks[0].getvalue()):
                    await asyncio.sleep(0.01)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task

        asyncio.run(go())
    assert recorder.ends[0].error_kind == "cancelled"


def test_headers_early_first_token_late_is_still_prefill() -> None:
    """vLLM-style: headers at once, then silence until the first token; the idle deadline must
    not cut the prefill short."""
    late = Reply(text="after prefill", fault=Fault(stall_after_chunks=0, stall_seconds=1.5))
    with FakeEndpoint([late]) as fake:
        completion, rec = run(fake, deadlines=Deadlines(first_byte=10, idle=0.5), retry=ONCE)
    assert completion.text == "after prefill"
    assert rec.ends[0].ttfb_s is not None and rec.ends[0].ttft_s is not None
