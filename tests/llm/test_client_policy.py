"""Retry waits, the network allow-list, ambient proxies, sniffed bodies, the probe."""

from __future__ import annotations

import asyncio
import sys

import httpx
import pytest
from tenacity import AsyncRetrying, RetryCallState

from solver.llm import (
    Endpoint,
    HostNotAllowed,
    HTTPStatusError,
    IdleTimeout,
    Message,
    ModelClient,
    Request,
    RetryPolicy,
    decode_stream,
    fold_events,
    redact,
    request_headers,
    retry_after_seconds,
    retryable_status,
)
from solver.llm._policy import Wait as _Wait
from solver.llm._policy import status_error
from solver.testing import FakeEndpoint
from solver.testing.fake_endpoint import Reply
from tests.llm.recorder import Recorder

REQUEST = Request(model="m", messages=(Message.text("user", "hi"),), max_tokens=64)


def state_after(error: BaseException, attempt: int = 1) -> RetryCallState:
    state = RetryCallState(AsyncRetrying(), fn=None, args=(), kwargs={})
    state.attempt_number = attempt
    try:
        raise error
    except BaseException:
        state.set_exception(sys.exc_info())  # type: ignore[arg-type]
    return state


def test_retry_after_is_honoured_up_to_max_wait() -> None:
    wait = _Wait(RetryPolicy(initial_wait=1.0, max_wait=30.0))
    asked = HTTPStatusError("busy", status=429, retry_after=7.0, retryable=True)
    assert wait(state_after(asked)) == 7.0
    greedy = HTTPStatusError("busy", status=429, retry_after=900.0, retryable=True)
    assert wait(state_after(greedy)) == 30.0


def test_backoff_grows_with_jitter_and_is_capped() -> None:
    wait = _Wait(RetryPolicy(initial_wait=1.0, max_wait=10.0))
    idle = IdleTimeout("idle")
    first = [wait(state_after(idle, 1)) for _ in range(50)]
    third = [wait(state_after(idle, 3)) for _ in range(50)]
    assert all(1.0 <= w <= 2.0 for w in first) and len(set(first)) > 1
    assert all(4.0 <= w <= 5.0 for w in third)
    assert wait(state_after(idle, 20)) == 10.0


def test_allow_list_refuses_other_hosts_before_connecting() -> None:
    async def go() -> None:
        async with ModelClient(Endpoint("http://127.0.0.1:9", "chat", "m")) as client:
            with pytest.raises(HostNotAllowed):
                # a different port on loopback: refused before any socket is opened
                await client._client().get("http://127.0.0.1:10/v1/models")

    asyncio.run(go())


def test_ambient_proxy_variables_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    recorder = Recorder()
    with FakeEndpoint([Reply(text="direct")]) as fake:

        async def go() -> str:
            async with ModelClient(Endpoint(fake.url, "chat", "m")) as client:
                return (await client.complete(REQUEST, recorder)).text

        assert asyncio.run(go()) == "direct"
    assert {c.port for c in recorder.connections} == {fake.port}


def test_json_body_for_a_stream_request_is_decoded() -> None:
    """E20: a server that ignores stream=true and answers with one JSON body."""
    body = (
        b'{"id":"c1","choices":[{"index":0,"message":{"role":"assistant","content":"whole"},'
        b'"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}'
    )

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(404)
        return httpx.Response(
            200, stream=httpx.ByteStream(body), headers={"content-type": "application/json"}
        )

    recorder = Recorder()

    async def go() -> str:
        endpoint = Endpoint("http://127.0.0.1:8000", "chat", "m")
        transport = httpx.MockTransport(handler)
        async with ModelClient(endpoint, transport=transport) as client:
            return (await client.complete(REQUEST, recorder)).text

    assert asyncio.run(go()) == "whole"
    assert recorder.sinks[0].getvalue() == body
    # re-reading the recorded bytes as the stream that was asked for gives the same answer
    assert fold_events(decode_stream("chat", [body])).text == "whole"
    assert recorder.ends[0].usage.input_tokens == 3


def test_probe_reads_served_model_and_context() -> None:
    with FakeEndpoint([], served_model="glm-4.6", context_length=8192) as fake:

        async def go() -> tuple[tuple[str, ...], int | None]:
            async with ModelClient(Endpoint(fake.url + "/v1", "chat", "m")) as client:
                info = await client.probe()
                return info.models, info.context_length

        assert asyncio.run(go()) == (("glm-4.6",), 8192)


def test_one_rule_for_retryable_statuses() -> None:
    statuses = (400, 401, 404, 408, 409, 425, 429, 500, 501, 503)
    assert [s for s in statuses if retryable_status(s)] == [408, 409, 425, 429, 500, 503]


def test_request_headers_per_protocol() -> None:
    anthropic = request_headers("anthropic", "k1", "rid", stream=True)
    assert anthropic["x-api-key"] == "k1" and "Authorization" not in anthropic
    assert anthropic["Accept"] == "text/event-stream" and anthropic["X-Request-ID"] == "rid"
    chat = request_headers("chat", "k2", "rid", stream=False)
    assert chat["Authorization"] == "Bearer k2" and chat["Accept"] == "application/json"
    assert "Authorization" not in request_headers("responses", None, "rid", stream=True)


def test_redact_masks_whole_and_cut_off_keys() -> None:
    key = "sk-" + "a1" * 20
    assert redact(f"bad {key}!", key) == "bad ***!"
    assert redact(f"echo {key[:15]}", [None, "", key]) == "echo ***"
    assert redact("short sk-a1a1", key) == "short sk-a1a1"  # under 8 characters: no claim
    assert redact("anything", None) == "anything"


def test_retry_after_header_forms() -> None:
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds("-1") == 0.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:30 GMT", now=1445412500.0) == 10.0
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds(None) is None


@pytest.mark.parametrize("status", [500, 505, 507, 520, 524, 529, 599, 408, 409, 425, 429])
def test_every_5xx_but_501_is_retryable(status: int) -> None:
    error = status_error(status, b"{}", httpx.Headers(), url="u", request_id=None, secret=None)
    assert error.retryable


@pytest.mark.parametrize("status", [501, 400, 401, 403, 404, 422])
def test_not_implemented_and_client_errors_are_final(status: int) -> None:
    error = status_error(status, b"{}", httpx.Headers(), url="u", request_id=None, secret=None)
    assert not error.retryable
