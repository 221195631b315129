"""An upstream's answer is read within bounds: one SSE event held past its limit, or a JSON
answer past its size, ends the request with a clear error to the client instead of growing
the proxy's memory; the proxy goes on serving."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from solver.llm.codec import MAX_EVENT_BYTES
from solver.proxy import Provider, ProxyConfig, ProxyServer
from solver.testing.fake_endpoint import Reply
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


class _JsonUpstream:
    """Answers every request with one JSON body of ``size`` bytes (E20: JSON for a stream)."""

    def __init__(self, size: int) -> None:
        filler = "j" * size
        body = json.dumps(
            {
                "id": "chatcmpl-j",
                "choices": [{"index": 0, "message": {"content": filler}, "finish_reason": "stop"}],
            }
        ).encode()
        head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}"
        self._answer = head.encode() + b"\r\nconnection: close\r\n\r\n" + body
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(10)
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                with contextlib.suppress(OSError):  # the proxy stopped reading at its limit
                    conn.sendall(self._answer)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()


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
    small, large = _JsonUpstream(1_000), _JsonUpstream(200_000)
    try:
        with _proxy_to(small.url) as proxy:
            assert ask("chat", proxy, stream=True, tools=False).text == "j" * 1_000
        with _proxy_to(large.url) as proxy:
            assert _failed("chat", proxy)
            metrics = httpx.get(proxy.url + "/metrics").text
            assert 'proxy_normalisations_total{case="response_too_large"} 1' in metrics
    finally:
        small.close()
        large.close()
