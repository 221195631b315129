"""An upstream's answer is read within bounds: one SSE event held past its limit, or a JSON
answer past its size, ends the request with a clear error to the client instead of growing
the proxy's memory; the proxy goes on serving."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from solver.proxy import Provider, ProxyConfig, ProxyServer
from solver.testing.fake_endpoint import Reply
from solver.wire.codec import MAX_EVENT_BYTES
from tests.llm.test_transport_fixes import RawServer, http
from tests.proxy.helpers import FRONTS, ask, proxied
from tests.proxy.test_liveness import ERRORS, _protocol_error


def _chunk(delta: dict[str, str], finish: str | None = None) -> bytes:
    frame = {"id": "chatcmpl-b", "object": "chat.completion.chunk", "model": "m"}
    frame["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]  # type: ignore[assignment]
    return b"data: " + json.dumps(frame).encode() + b"\n\n"


def _failed(front: str, proxy: ProxyServer) -> bool:
    """True when the client saw its protocol's error or a failed answer."""
    try:
        seen = ask(front, proxy, stream=True, tools=False, timeout=60)
    except ERRORS as exc:
        return _protocol_error(exc)
    return seen.stop == "failed"


@pytest.mark.parametrize("front", FRONTS)
def test_an_event_held_past_the_limit_fails_the_request_and_the_proxy_goes_on(front: str) -> None:
    giant = _chunk({"content": "g" * (MAX_EVENT_BYTES + (1 << 20))})
    ending = _chunk({}, "stop") + b"data: [DONE]\n\n"
    replies = [
        Reply(raw_chunks=[_chunk({"role": "assistant", "content": "Start."}), giant, ending]),
        Reply(text="Next answer."),
    ]
    with proxied(replies, "chat") as (fake, proxy):
        assert _failed(front, proxy)
        metrics = httpx.get(proxy.url + "/metrics").text
        assert 'proxy_normalisations_total{case="event_too_large"} 1' in metrics
        assert ask(front, proxy, stream=True, tools=False).text == "Next answer."
        fake.assert_consumed()


def test_a_stream_past_its_limit_fails_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    from solver.proxy import _exchange

    monkeypatch.setattr(_exchange, "MAX_UPSTREAM_STREAM", 200_000)
    long, short = Reply(text="s" * 400_000, chunk_chars=100), Reply(text="Short.")
    with proxied([long, short], "chat") as (fake, proxy):
        assert _failed("chat", proxy)
        metrics = httpx.get(proxy.url + "/metrics").text
        assert 'proxy_normalisations_total{case="response_too_large"} 1' in metrics
        assert ask("chat", proxy, stream=True, tools=False).text == "Short."
        fake.assert_consumed()


def _json_upstream(size: int) -> RawServer:
    """Answers every request with one JSON body of ``size`` bytes (E20: JSON for a stream)."""
    filler = "j" * size
    body = json.dumps(
        {
            "id": "chatcmpl-j",
            "choices": [{"index": 0, "message": {"content": filler}, "finish_reason": "stop"}],
        }
    ).encode()
    return RawServer(lambda path: http(body, sized=True))


@contextmanager
def _proxy_to(url: str) -> Iterator[ProxyServer]:
    provider = Provider("json", url, "chat")
    config = ProxyConfig(providers=(provider,), active="json", host="127.0.0.1", port=0)
    with ProxyServer(config) as proxy:
        yield proxy


def test_a_json_answer_past_its_limit_is_an_error_not_a_truncated_body(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from solver.proxy import _exchange

    monkeypatch.setattr(_exchange, "MAX_UPSTREAM_BODY", 50_000)
    with _json_upstream(1_000) as small, _json_upstream(200_000) as large:
        with _proxy_to(small.url + "/v1") as proxy:
            assert ask("chat", proxy, stream=True, tools=False).text == "j" * 1_000
        with _proxy_to(large.url + "/v1") as proxy:
            assert _failed("chat", proxy)
            metrics = httpx.get(proxy.url + "/metrics").text
            assert 'proxy_normalisations_total{case="response_too_large"} 1' in metrics
