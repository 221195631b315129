"""Hostile upstreams under load: 1,000 streamed requests from 32 concurrent clients through
the proxy to one upstream whose answers are, by request, well formed or hostile (interim 1xx
answers with and without headers, bodies past their Content-Length, conflicting lengths,
non-ASCII digits in a length, chunk-size overflow, connections closed mid-body). Every client
must receive exactly its own answer or a clear error: never another request's text, never a
success for a broken answer. The upstream keeps its connections alive, so a connection the
proxy wrongly returned to its pool would hand stale bytes to the next client on it."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx

from solver.proxy import Provider, ProxyConfig, ProxyDeadlines, ProxyServer

REQUESTS = 1000
CLIENTS = 32


def _events(text: str) -> bytes:
    head = {"id": "chatcmpl-h", "object": "chat.completion.chunk", "model": "m"}
    delta = {"role": "assistant", "content": text}
    frames = [
        {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    return b"".join(b"data: " + json.dumps(f).encode() + b"\n\n" for f in frames) + (
        b"data: [DONE]\n\n"
    )


_SSE = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
_CHUNKED = b"transfer-encoding: chunked\r\n\r\n"


def _length(body: bytes) -> bytes:
    return _SSE + b"content-length: %d\r\n\r\n" % len(body) + body


def _chunked(body: bytes) -> bytes:
    half = len(body) // 2
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (body[:half], body[half:]))
    return _SSE + _CHUNKED + chunks + b"0\r\n\r\n"


# name -> (the answer's bytes for a request's own text, close after it, answered well)
Answer = Callable[[str], bytes]
KINDS: dict[str, tuple[Answer, bool, bool]] = {
    "chunked": (lambda t: _chunked(_events(t)), False, True),
    "length": (lambda t: _length(_events(t)), False, True),
    "interim": (lambda t: b"HTTP/1.1 100 Continue\r\n\r\n" + _chunked(_events(t)), False, True),
    "interim_headers": (
        lambda t: (
            b"HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n" + _length(_events(t))
        ),
        False,
        True,
    ),
    # a whole second answer rides behind the first: the next request must never see it
    "past_length": (
        lambda t: _length(_events(t)) + _length(_events("stale " + t)),
        False,
        True,
    ),
    "past_length_garbage": (lambda t: _length(_events(t)) + b"\r\nXYZ", False, True),
    "conflicting_lengths": (
        lambda t: _SSE + b"content-length: 10\r\ncontent-length: 20\r\n\r\n" + _events(t),
        True,
        False,
    ),
    "length_and_chunked": (
        lambda t: _SSE + b"content-length: 5\r\n" + _chunked(_events(t))[len(_SSE) :],
        True,
        False,
    ),
    "non_ascii_digits": (
        lambda t: _SSE + "content-length: \u00b2\r\n\r\n".encode("latin-1") + _events(t),
        True,
        False,
    ),
    "chunk_overflow": (
        lambda t: _SSE + _CHUNKED + b"fffffffffffffffffffff\r\n" + _events(t),
        True,
        False,
    ),
    "closed_mid_body": (
        lambda t: _chunked(_events(t))[: len(_SSE) + len(_CHUNKED) + 60],
        True,
        False,
    ),
    "closed_mid_length": (
        lambda t: _SSE + b"content-length: 5000\r\n\r\n" + _events(t)[:-20],
        True,
        False,
    ),
}
NAMES = sorted(KINDS)


def _kind(number: int) -> str:
    # one request in three is plain; the hostile kinds share the rest
    return "chunked" if number % 3 == 0 else NAMES[(number // 3) % len(NAMES)]


class _Upstream:
    """A keep-alive Chat Completions server on 127.0.0.1 in its own thread and loop."""

    def __init__(self) -> None:
        self.connections = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                body = json.loads(await reader.readexactly(length))
                text = body["messages"][-1]["content"]
                answer, close, _ = KINDS[_kind(int(text.split("-")[1]))]
                writer.write(answer(f"answer for {text}"))  # one write: one answer, whole
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, IndexError, ValueError):
            pass
        writer.close()

    def __enter__(self) -> _Upstream:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@contextmanager
def _proxy(upstream: _Upstream) -> Iterator[ProxyServer]:
    provider = Provider("hostile", f"http://127.0.0.1:{upstream.port}/v1", "chat")
    config = ProxyConfig(
        providers=(provider,),
        active="hostile",
        host="127.0.0.1",
        port=0,
        deadlines=ProxyDeadlines(first_byte=20, idle=10, open_after=5, max_wall=60),
    )
    with ProxyServer(config) as proxy:
        yield proxy


def _read(lines: list[str]) -> tuple[str, bool, bool]:
    """The content of a Chat stream, whether it ended in ``[DONE]`` with a finish, and
    whether it carried an error chunk."""
    text, done, finished, failed = "", False, False, False
    for line in lines:
        if not line.startswith("data: "):
            continue
        data = line[6:]
        if data == "[DONE]":
            done = True
            continue
        chunk = json.loads(data)
        if "error" in chunk:
            failed = bool(chunk["error"].get("message"))
            continue
        for choice in chunk.get("choices", []):
            text += choice.get("delta", {}).get("content") or ""
            finished = finished or choice.get("finish_reason") == "stop"
    return text, done and finished, failed


async def _clients(url: str) -> tuple[Counter[str], list[str]]:
    outcomes: Counter[str] = Counter()
    wrong: list[str] = []
    numbers = iter(range(REQUESTS))

    async def client() -> None:
        async with httpx.AsyncClient(timeout=60) as http:
            for number in numbers:
                kind = _kind(number)
                own = f"answer for req-{number}"
                body = {
                    "model": "m",
                    "stream": True,
                    "messages": [{"role": "user", "content": f"req-{number}"}],
                }
                async with http.stream("POST", url, json=body) as response:
                    if response.status_code != 200:
                        error = json.loads(await response.aread())["error"]
                        assert error["message"], f"{kind}: an error without a message"
                        clear = not KINDS[kind][2]
                        outcomes[f"{kind}: error {response.status_code}"] += 1
                        if not clear:
                            wrong.append(f"req-{number} ({kind}): {error['message']}")
                        continue
                    lines = [line async for line in response.aiter_lines()]
                text, success, failed = _read(lines)
                if not own.startswith(text):  # another request's text, or a stale answer
                    wrong.append(f"req-{number} ({kind}) got {text!r}")
                elif KINDS[kind][2] and not (success and text == own):
                    wrong.append(f"req-{number} ({kind}): {text!r}, success={success}")
                elif not KINDS[kind][2] and not failed:
                    wrong.append(f"req-{number} ({kind}) ended without an error: {text!r}")
                else:
                    outcomes[f"{kind}: {'answer' if success else 'stream error'}"] += 1

    await asyncio.gather(*(client() for _ in range(CLIENTS)))
    return outcomes, wrong


def test_every_client_gets_its_own_answer_or_a_clear_error() -> None:
    with _Upstream() as upstream, _proxy(upstream) as proxy:
        outcomes, wrong = asyncio.run(_clients(proxy.url + "/v1/chat/completions"))
    assert not wrong, "\n".join(wrong[:20])
    assert sum(outcomes.values()) == REQUESTS
    for name, (_, _, well) in KINDS.items():
        seen = sum(n for key, n in outcomes.items() if key.startswith(name + ":"))
        assert seen, f"{name}: never exercised"
        if well:
            assert outcomes[f"{name}: answer"] == seen
    # kept-alive connections were reused (the well-formed answers), not one per request
    assert upstream.connections < REQUESTS
