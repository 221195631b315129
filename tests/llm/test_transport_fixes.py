"""Client behaviour against a raw loopback server that sends exactly the scripted bytes: silent
probes, mislabelled bodies, streams that go quiet after an error or a finish."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from solver.llm import (
    Completion,
    Deadlines,
    Endpoint,
    FirstByteTimeout,
    HTTPStatusError,
    IdleTimeout,
    Message,
    ModelClient,
    ProbeTimeout,
    Request,
    RetryPolicy,
    StreamError,
    StreamProtocolError,
    TextDelta,
    decode_body,
    decode_stream,
    fold_events,
)
from tests.llm.recorder import Recorder

ONCE = RetryPolicy(max_attempts=1)
HANG_GUARD = 20.0  # far above every deadline used here: reaching it means the client hung

# path -> raw response bytes; None: accept, read the request, never answer
Script = Callable[[str], bytes | None]


class RawServer:
    """A loopback HTTP/1.1 server answering each request with scripted bytes. With ``hold``
    the connection stays open after the bytes (no EOF), as a silent server would leave it."""

    def __init__(self, script: Script, *, hold: bool = False) -> None:
        self._script = script
        self._hold = hold
        self._stop = threading.Event()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.1)
        self.paths: list[str] = []
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> RawServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                got = conn.recv(65536)
                if not got:
                    return
                data += got
            head, _, body = data.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(body) < length:
                body += conn.recv(65536)
            path = head.split(b" ")[1].decode()
            self.paths.append(path)
            reply = self._script(path)
            if reply is not None:
                sent_id = b""
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"x-request-id":
                        sent_id = value.strip()
                try:
                    conn.sendall(reply.replace(b"{SENT_ID}", sent_id))  # an echoing server
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client stopped reading (a bounded read) and closed
            if reply is None or self._hold:
                self._stop.wait()


def http(
    body: bytes,
    *,
    status: int = 200,
    content_type: str = "application/json",
    sized: bool = False,
    extra: str = "",
) -> bytes:
    """An HTTP/1.1 response; close-delimited (the body ends at EOF) unless ``sized``."""
    length = f"Content-Length: {len(body)}\r\n" if sized else ""
    head = (
        f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\n{length}{extra}"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


def sse(*objects: Any, done: bool = False) -> bytes:
    out = b"".join(b"data: " + orjson.dumps(o) + b"\n\n" for o in objects)
    return out + (b"data: [DONE]\n\n" if done else b"")


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def request(*, stream: bool = True) -> Request:
    messages = (Message.text("user", "What is 1+1?"),)
    return Request(model="glm-fake", messages=messages, max_tokens=64, stream=stream)


def complete(
    url: str,
    deadlines: Deadlines,
    *,
    req: Request | None = None,
    recorder: Recorder | None = None,
    retry: RetryPolicy = ONCE,
) -> Completion:
    async def go() -> Completion:
        endpoint = Endpoint(url, "chat", "glm-fake")
        async with ModelClient(endpoint, deadlines=deadlines, retry=retry) as client:
            return await asyncio.wait_for(
                client.complete(req or request(), recorder or Recorder()), HANG_GUARD
            )

    return asyncio.run(go())


def models_or(answer: bytes) -> Script:
    models = http(orjson.dumps({"data": [{"id": "glm-fake"}]}), sized=True)
    missing = http(b"{}", status=404, sized=True)

    def script(path: str) -> bytes:
        if path.endswith("/models"):
            return models
        return missing if path.endswith("/props") else answer

    return script


# ---------------------------------------------------------------- probe


def test_probe_of_a_silent_server_raises_probe_timeout() -> None:
    async def go() -> None:
        endpoint = Endpoint(server.url, "chat", "glm-fake")
        deadlines = Deadlines(connect=1, probe=0.3)
        async with ModelClient(endpoint, deadlines=deadlines) as client:
            await asyncio.wait_for(client.probe(), HANG_GUARD)

    with RawServer(lambda path: None) as server, pytest.raises(ProbeTimeout):
        asyncio.run(go())


def test_complete_against_a_silent_server_ends_at_its_deadlines() -> None:
    # the probe is bounded by the call's own deadlines, then the attempt's first-byte deadline
    deadlines = Deadlines(connect=1, first_byte=0.3, idle=0.3, total=1)
    recorder = Recorder()
    with RawServer(lambda path: None) as server, pytest.raises(FirstByteTimeout):
        complete(server.url, deadlines, recorder=recorder)
    assert [end.error_kind for end in recorder.ends] == ["first_byte_timeout"]


# ---------------------------------------------------------------- body or stream (E20)

ANSWER_SSE = b"\n" + sse(
    chunk({"role": "assistant", "content": "Two."}),
    chunk({}, "stop"),
    {"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}},
    done=True,
)
ANSWER_BODY = b"  " + orjson.dumps(
    {
        "id": "chatcmpl-1",
        "choices": [{"index": 0, "message": {"content": "Two."}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2},
    }
)
QUICK = Deadlines(connect=2, first_byte=5, idle=5, total=20)


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(
    ("raw", "label"),
    [(ANSWER_SSE, "application/json"), (ANSWER_BODY, "text/event-stream")],
    ids=["sse-labelled-json", "json-labelled-sse"],
)
def test_live_and_offline_decoding_agree_whatever_the_label(
    raw: bytes, label: str, stream: bool
) -> None:
    recorder = Recorder()
    with RawServer(models_or(http(raw, content_type=label))) as server:
        completion = complete(server.url, QUICK, req=request(stream=stream), recorder=recorder)
    assert completion.text == "Two." and completion.finish_reason == "stop"
    assert completion.usage.output_tokens == 2
    recorded = recorder.sinks[0].getvalue()
    assert recorded == raw
    offline = decode_stream("chat", [recorded]) if stream else decode_body("chat", recorded)
    assert fold_events(offline) == completion


# ---------------------------------------------------------------- an error ends a Chat stream


@pytest.mark.parametrize(("code", "retryable"), [(503, True), (400, False)])
def test_chat_error_then_silence_ends_at_the_error(code: int, retryable: bool) -> None:
    stream = sse(
        chunk({"role": "assistant", "content": "Par"}),
        {"error": {"message": "engine overloaded", "code": code}},
        chunk({"content": "tial after the error"}),
    )
    recorder = Recorder()
    # the idle deadline is long: only ending at the error itself gives a server_error
    deadlines = Deadlines(connect=2, first_byte=10, idle=10)
    with (
        RawServer(models_or(http(stream, content_type="text/event-stream")), hold=True) as server,
        pytest.raises(StreamProtocolError) as caught,
    ):
        complete(server.url, deadlines, recorder=recorder)
    assert caught.value.kind == "server_error"
    assert caught.value.retryable is retryable
    texts = [e for e in recorder.events if isinstance(e, TextDelta)]
    assert texts == [TextDelta("Par")]
    assert isinstance(recorder.events[-1], StreamError)


# ---------------------------------------------------------------- finish, then silence


@pytest.mark.parametrize("with_usage", [True, False])
def test_finish_then_silence_keeps_the_answer(with_usage: bool) -> None:
    usage = {
        "id": "chatcmpl-1",
        "choices": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2},
    }
    frames = [chunk({"role": "assistant", "content": "Two."}), chunk({}, "stop")]
    stream = sse(*frames, *([usage] if with_usage else []))  # no [DONE], no EOF
    recorder = Recorder()
    # a long idle deadline, a short grace: only the grace can end this stream well
    deadlines = Deadlines(connect=2, first_byte=10, idle=10, finish_grace=0.3)
    with RawServer(models_or(http(stream, content_type="text/event-stream")), hold=True) as server:
        completion = complete(server.url, deadlines, recorder=recorder)
    assert completion.text == "Two." and completion.finish_reason == "stop"
    assert completion.usage.output_tokens == (2 if with_usage else 0)
    (end,) = recorder.ends
    assert end.error_kind is None and end.finish_reason == "stop"
    assert "E06_eof_after_finish" in end.normalised_cases


def test_silence_before_any_finish_is_still_an_idle_timeout() -> None:
    stream = sse(chunk({"role": "assistant", "content": "Tw"}))
    deadlines = Deadlines(connect=2, first_byte=10, idle=0.3, finish_grace=0.1)
    with (
        RawServer(models_or(http(stream, content_type="text/event-stream")), hold=True) as server,
        pytest.raises(IdleTimeout),
    ):
        complete(server.url, deadlines)


# ---------------------------------------------------------------- a failed probe is not final

TOO_LONG = orjson.dumps(
    {
        "object": "error",
        "message": "This model's maximum context length is 130 tokens. However, you requested "
        "164 tokens (100 tokens from the input messages, 64 for the completion).",
    }
)


def flaky_models(context_errors: int) -> tuple[Script, list[int]]:
    """/models fails once with a 503, then reports a 130-token context; the first
    ``context_errors`` completions are refused as too long, later ones answered."""
    unavailable = http(b"{}", status=503, sized=True)
    models = http(orjson.dumps({"data": [{"id": "glm-fake", "max_model_len": 130}]}), sized=True)
    refused = http(TOO_LONG, status=400, sized=True)
    answer = http(ANSWER_SSE, content_type="text/event-stream")
    counts = [0, 0]  # /models requests, completion requests

    def script(path: str) -> bytes:
        if path.endswith("/models"):
            counts[0] += 1
            return unavailable if counts[0] == 1 else models
        counts[1] += 1
        return refused if counts[1] <= context_errors else answer

    return script, counts


def test_a_failed_probe_is_asked_again_on_the_next_call() -> None:
    script, counts = flaky_models(context_errors=0)

    async def go(url: str) -> tuple[int | None, int | None]:
        async with ModelClient(Endpoint(url, "chat", "glm-fake"), deadlines=QUICK) as client:
            await client.complete(request(), Recorder())
            first = client.server_info
            await client.complete(request(), Recorder())
            second = client.server_info
        return (first and first.context_length), (second and second.context_length)

    with RawServer(script) as server:
        assert asyncio.run(go(server.url)) == (None, 130)
    assert counts == [2, 2]


def test_context_error_with_unknown_context_probes_again_and_recaps() -> None:
    script, counts = flaky_models(context_errors=1)
    recorder = Recorder()
    retry = RetryPolicy(max_attempts=3, initial_wait=0.01, max_wait=0.05)
    with RawServer(script) as server:
        completion = complete(server.url, QUICK, recorder=recorder, retry=retry)
    assert completion.text == "Two."
    assert counts == [2, 2]
    assert [s.max_tokens_cap for s in recorder.starts] == [None, 30]  # 130 - 100 input tokens


# ---------------------------------------------------------------- the server's own id


@pytest.mark.parametrize(
    ("header", "body_id", "kept"),
    [
        ("hdr-9", "chatcmpl-7", "chatcmpl-7"),  # the body's id is the server's own
        ("{SENT_ID}", None, None),  # an echo of ours is not the server's id
        ("hdr-9", None, "hdr-9"),  # no id in the body: a header that differs is kept
    ],
)
def test_the_server_id_is_its_own(header: str, body_id: str | None, kept: str | None) -> None:
    frames = [chunk({"content": "Two."}), chunk({}, "stop")]
    for frame in frames:
        if body_id is None:
            del frame["id"]
        else:
            frame["id"] = body_id
    extra = f"X-Request-ID: {header}\r\n"
    raw = http(sse(*frames, done=True), content_type="text/event-stream", extra=extra)
    recorder = Recorder()
    with RawServer(models_or(raw)) as server:
        complete(server.url, QUICK, recorder=recorder)
    (end,) = recorder.ends
    assert end.server_request_id == kept


# ---------------------------------------------------------------- bounded reads


def _complete_with(url: str, recorder: Recorder, **client: Any) -> Completion:
    async def go() -> Completion:
        endpoint = Endpoint(url, "chat", "glm-fake")
        deadlines = Deadlines(connect=2, first_byte=10, idle=10, total=60)
        async with ModelClient(endpoint, deadlines=deadlines, retry=ONCE, **client) as c:
            return await asyncio.wait_for(c.complete(request(), recorder), HANG_GUARD)

    return asyncio.run(go())


def test_an_event_that_never_ends_fails_the_attempt_without_waiting_for_more() -> None:
    from solver.wire.codec import MAX_EVENT_BYTES

    # an event past the limit, no blank line ever, and the connection left open
    endless = b"data: " + b'{"choices":[{"delta":{"content":"' + b"x" * (MAX_EVENT_BYTES + 1)
    answer = http(endless, content_type="text/event-stream")
    recorder = Recorder()
    server = RawServer(models_or(answer), hold=True)
    with server, pytest.raises(StreamProtocolError, match="ran past") as caught:
        _complete_with(server.url, recorder)
    assert caught.value.kind == "malformed" and caught.value.retryable
    (end,) = recorder.ends
    assert "event_too_large" in end.normalised_cases
    assert end.response_bytes < MAX_EVENT_BYTES + (1 << 20)  # read up to the limit, no further


def test_a_response_past_its_byte_limit_fails_and_stores_no_more() -> None:
    # well-formed events that never finish: only the byte limit ends them before the deadline
    events = sse(*(chunk({"content": "y" * 100}) for _ in range(5000)))
    recorder = Recorder()
    server = RawServer(models_or(http(events, content_type="text/event-stream")), hold=True)
    with server, pytest.raises(StreamProtocolError, match="ran past 100000 bytes") as caught:
        _complete_with(server.url, recorder, max_response_bytes=100_000)
    assert caught.value.kind == "malformed"
    (end,) = recorder.ends
    assert "response_too_large" in end.normalised_cases
    assert 100_000 < end.response_bytes < 100_000 + (1 << 17)
    assert len(recorder.sinks[0].getvalue()) == end.response_bytes


def test_an_error_body_is_read_only_to_its_limit() -> None:
    from solver.llm.client import ERROR_BODY_LIMIT

    message = orjson.dumps({"error": {"message": "overloaded, " + "z" * (8 << 20)}})
    answer = http(message, status=400, sized=True)
    recorder = Recorder()
    server = RawServer(models_or(answer), hold=True)
    with server, pytest.raises(HTTPStatusError) as caught:
        _complete_with(server.url, recorder)
    assert caught.value.status == 400
    (end,) = recorder.ends
    assert end.response_bytes < ERROR_BODY_LIMIT + (1 << 17)  # not the 8 MB the server sent


def test_a_json_body_past_its_limit_fails_before_it_is_decoded() -> None:
    from solver.llm.client import MAX_BODY_BYTES

    filler = "b" * (MAX_BODY_BYTES + (1 << 20))
    body = orjson.dumps(
        {
            "id": "c",
            "choices": [{"index": 0, "message": {"content": filler}, "finish_reason": "stop"}],
        }
    )
    recorder = Recorder()
    server = RawServer(models_or(http(body, sized=True)), hold=True)
    with server, pytest.raises(StreamProtocolError, match="JSON body ran past") as caught:
        _complete_with(server.url, recorder)
    assert caught.value.kind == "malformed"
    (end,) = recorder.ends
    assert "response_too_large" in end.normalised_cases
    assert end.response_bytes < MAX_BODY_BYTES + (1 << 20)
