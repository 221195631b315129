"""The upstream dies, stalls, prefills for long or refuses: the client always gets a
protocol-correct answer or error in bounded time, keepalives flow only while the upstream
deadline holds, and failover happens only before any model output."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from solver.proxy import ProxyDeadlines
from solver.testing.fake_endpoint import Fault, Reply
from tests.proxy.helpers import FRONTS, ask, proxied

FAST = ProxyDeadlines(first_byte=0.6, idle=0.4, keepalive=0.1, open_after=0.05, max_wall=60)
ERRORS = (anthropic.APIError, openai.APIError)
BOUND = 15.0  # "did not hang": generous, the deadlines above are all under 2 s


def _protocol_error(exc: Exception) -> bool:
    """The client saw its protocol's error: an HTTP error status, an Anthropic ``error`` event
    (the SDK raises it as a status error) or a Chat error chunk (an APIError carrying the error
    body). A dropped connection or a client-side timeout is no protocol error."""
    if isinstance(exc, anthropic.APIConnectionError | openai.APIConnectionError):
        return False
    if isinstance(exc, anthropic.APIStatusError | openai.APIStatusError):
        return True
    return isinstance(exc, openai.APIError) and isinstance(exc.body, dict)


def _fails(front: str, proxy: object, *, stream: bool) -> bool:
    try:
        seen = ask(front, proxy, stream=stream, tools=False)  # type: ignore[arg-type]
    except ERRORS as exc:
        assert _protocol_error(exc), f"{front}: {type(exc).__name__}: {exc}"
        return True
    return seen.stop == "failed"  # Responses: a response.failed event


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize(
    "fault",
    [
        Fault(stall_after_chunks=3),
        Fault(reset_after_chunks=3),
        Fault(truncate_after_chunks=3),
        Fault(error_event_after_chunks=3),
        Fault(prefill_delay=30),
    ],
    ids=["stall", "reset", "truncate", "error-event", "no-first-byte"],
)
@pytest.mark.parametrize("upstream", ["chat", "responses", "anthropic"])
def test_a_dying_upstream_ends_in_an_error_for_every_front(
    upstream: str, fault: Fault, stream: bool
) -> None:
    reply = Reply(reasoning="r" * 40, text="t" * 80, chunk_chars=4, fault=fault)
    with proxied(lambda _: reply, upstream, deadlines=FAST) as (_, proxy):
        for front in FRONTS:
            started = time.monotonic()
            assert _fails(front, proxy, stream=stream), f"{front} saw a success"
            assert time.monotonic() - started < BOUND


def _raw_stream(url: str, path: str, body: dict[str, object]) -> list[str]:
    with httpx.stream("POST", url + path, json=body, timeout=BOUND) as response:
        return [frame for frame in response.read().decode().split("\n\n") if frame]


def test_long_prefill_gets_pings_then_the_answer() -> None:
    reply = Reply(text="late but fine", fault=Fault(prefill_delay=0.5))
    limits = ProxyDeadlines(first_byte=10, idle=5, keepalive=0.1, open_after=0.02)
    with proxied(lambda _: reply, "chat", deadlines=limits) as (_, proxy):
        body = {"model": "g", "max_tokens": 50, "stream": True,
                "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
        frames = _raw_stream(proxy.url, "/v1/messages", body)
        assert frames[0].startswith("event: message_start")
        pings = [i for i, f in enumerate(frames) if f.startswith("event: ping")]
        first_text = next(i for i, f in enumerate(frames) if "text_delta" in f)
        assert pings and max(pings) < first_text
        assert frames[-1].startswith("event: message_stop")
        chat = {"model": "g", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        frames = _raw_stream(proxy.url, "/v1/chat/completions", chat)
        assert any(f == ": keepalive" for f in frames) and frames[-1] == "data: [DONE]"
        responses = {"model": "g", "stream": True, "input": "hi"}
        frames = _raw_stream(proxy.url, "/v1/responses", responses)
        assert frames[0].startswith("event: response.created")
        # a data event, which Codex's idle timer counts (it ignores comments)
        assert frames.count(frames[1]) == 1 and frames[1].startswith("event: response.in_progress")
        assert sum(f.startswith("event: response.in_progress") for f in frames) > 1
        assert frames[-1].startswith("event: response.completed")
        # and the SDKs read through the pings
        for front in FRONTS:
            assert ask(front, proxy, stream=True, tools=False).text == "late but fine"


def test_pings_stop_when_the_first_byte_deadline_passes() -> None:
    """E39: keepalives must not mask a dead upstream."""
    reply = Reply(text="never", fault=Fault(prefill_delay=30))
    limits = ProxyDeadlines(first_byte=0.8, idle=5, keepalive=0.15, open_after=0.05)
    with proxied(lambda _: reply, "chat", deadlines=limits) as (_, proxy):
        body = {"model": "g", "max_tokens": 50, "stream": True,
                "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
        started = time.monotonic()
        frames = _raw_stream(proxy.url, "/v1/messages", body)
        assert time.monotonic() - started < BOUND
        assert frames[0].startswith("event: message_start")
        assert any(f.startswith("event: ping") for f in frames)
        assert frames[-1].startswith("event: error") and "overloaded_error" in frames[-1]
        assert not any("message_stop" in f for f in frames)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
def test_rate_limit_and_server_errors_keep_their_status(stream: bool) -> None:
    replies = [Reply(fault=Fault(status=429, retry_after=1)), Reply(fault=Fault(status=500))]
    for reply in replies:
        with proxied(lambda _, r=reply: r, "chat") as (_, proxy):
            with pytest.raises(anthropic.RateLimitError if reply.fault and reply.fault.status
                               == 429 else anthropic.APIStatusError):  # fmt: skip
                ask("anthropic", proxy, stream=stream, tools=False)
            with pytest.raises(openai.APIStatusError) as info:
                ask("chat", proxy, stream=stream, tools=False)
            assert info.value.status_code == (reply.fault.status if reply.fault else 0)
            with pytest.raises(openai.APIStatusError):
                ask("responses", proxy, stream=stream, tools=False)


def test_failover_before_output_and_not_after(tmp_path: Path) -> None:
    refused = Reply(fault=Fault(status=503))
    good = Reply(text="from the backup")
    with proxied([refused] * 3, "chat", second=[good] * 3, telemetry=tmp_path / "t.db") as (
        fake, proxy,
    ):  # fmt: skip
        for front in FRONTS:
            assert ask(front, proxy, stream=True, tools=False).text == "from the backup"
        assert len(fake.requests) == 3
    stalled = Reply(text="half an answer " * 4, chunk_chars=4, fault=Fault(stall_after_chunks=4))
    # a generous first-byte budget: only the stall after output may end this one
    after_output = replace(FAST, first_byte=10)
    with proxied(lambda _: stalled, "chat", deadlines=after_output, second=[]) as (_, proxy):
        assert _fails("anthropic", proxy, stream=True)
        assert proxy.backup.requests == []  # type: ignore[attr-defined]


def test_client_disconnect_closes_the_upstream() -> None:
    reply = Reply(text="x" * 400, chunk_chars=2, chunk_delay=0.05)
    with proxied(lambda _: reply, "chat") as (_, proxy):
        body = {"model": "g", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        with httpx.stream("POST", proxy.url + "/v1/chat/completions", json=body) as response:
            for _ in response.iter_raw():
                break
        metrics = proxy.state.metrics
        deadline = time.monotonic() + BOUND
        while ("chat", "fake", "client_cancel") not in metrics.requests:
            assert time.monotonic() < deadline, dict(metrics.requests)
            time.sleep(0.05)
        assert metrics.in_flight == 0


def test_breaker_moves_a_failing_provider_to_the_back() -> None:
    """After 4 failures before output the failing provider is tried last; a Retry-After from a
    429 does the same at once."""
    refused = Reply(fault=Fault(status=503))
    good = Reply(text="backup")
    with proxied(lambda _: refused, "chat", second=lambda _: good) as (fake, proxy):
        for _ in range(6):
            assert ask("chat", proxy, stream=True, tools=False).text == "backup"
        assert len(fake.requests) == 4
        assert len(proxy.backup.requests) == 6  # type: ignore[attr-defined]
    limited = Reply(fault=Fault(status=429, retry_after=30))
    with proxied(lambda _: limited, "chat", second=lambda _: good) as (fake, proxy):
        for _ in range(3):
            assert ask("anthropic", proxy, stream=False, tools=False).text == "backup"
        assert len(fake.requests) == 1


def test_a_dead_upstream_is_reported_at_once_to_the_next_requests() -> None:
    """An agent retrying against an upstream that let its first-byte deadline pass gets the
    reason at once, not one more full first-byte deadline per retry."""
    reply = Reply(text="never", fault=Fault(prefill_delay=30))
    with proxied(lambda _: reply, "chat", deadlines=FAST) as (fake, proxy):
        with pytest.raises(openai.APIStatusError) as first:
            ask("chat", proxy, stream=False, tools=False)
        assert "first-byte deadline" in str(first.value)
        for front in FRONTS:
            with pytest.raises(ERRORS) as again:
                ask(front, proxy, stream=True, tools=False)
            assert _protocol_error(again.value)
            assert "is answering" in str(again.value) and "first-byte deadline" in str(again.value)
        response = httpx.post(
            proxy.url + "/v1/chat/completions",
            json={"model": "g", "messages": [{"role": "user", "content": "hi"}]},
            timeout=BOUND,
        )
        assert response.status_code == 503 and int(response.headers["retry-after"]) >= 1
        assert len(fake.requests) == 1  # none of the later requests reached the dead upstream


def test_a_425_fails_over_like_the_model_client_retries_it() -> None:
    """One rule for what may succeed elsewhere: the client retries 425, the proxy fails over."""
    good = Reply(text="from the backup")
    with proxied([Reply(fault=Fault(status=425))], "chat", second=[good]) as (fake, proxy):
        assert ask("chat", proxy, stream=True, tools=False).text == "from the backup"
        assert len(fake.requests) == 1
