"""A scripted fake model server: a real HTTP/1.1 server on 127.0.0.1 in a background thread.

It speaks the three protocols the transport knows, streamed (chunked SSE) and not streamed:

- ``POST /v1/chat/completions``  SGLang-style Chat Completions: a role chunk, ``reasoning_content``
  deltas, ``content`` deltas, ``tool_calls`` deltas, one finish chunk with ``delta: {}``, a
  ``choices: []`` usage chunk when ``stream_options.include_usage`` is set, then ``[DONE]``.
- ``POST /v1/responses``         OpenAI Responses events (``response.created`` ...
  ``response.completed`` / ``response.incomplete``), no ``[DONE]``.
- ``POST /v1/messages``          Anthropic Messages events (``message_start``, ``ping``, thinking
  blocks with a ``signature_delta``, text, ``tool_use``, ``message_delta``, ``message_stop``).
- ``GET /v1/models`` (served model id and ``max_model_len``), ``GET /health``, ``GET /ready``.

API::

    @dataclass class Reply:
        text: str = ""; reasoning: str = ""
        tool_calls: list[tuple[str, str, str]] = []   # (id, name, arguments JSON)
        finish_reason: str = "stop"
        usage: tuple[int, int] | None = None         # (prompt, completion); None = from lengths
        cached_tokens: int = 0
        chunk_chars: int = 8                          # characters per streamed delta
        fault: Fault | None = None
        raw_chunks: list[bytes] | None = None         # send these exact bytes, one write each
        chunk_delay: float = 0.0                      # seconds between frames
        matched_stop: str | int | None = None        # SGLang matched_stop / Anthropic stop_sequence

    @dataclass class Fault:
        status: int | None = None                     # answer with this HTTP status instead
        retry_after: float | None = None              # Retry-After header (seconds)
        message: str | None = None                    # error message for ``status``
        stall_after_chunks: int | None = None         # go silent after N frames ...
        stall_seconds: float = 3600                   # ... for this long (ends on close())
        reset_after_chunks: int | None = None         # TCP RST after N frames
        error_event_after_chunks: int | None = None   # in-band error object after N frames
        truncate_after_chunks: int | None = None      # clean EOF after N frames, no finish
        prefill_delay: float = 0.0                    # no bytes, not even headers, this long
        malformed_json_after_chunks: int | None = None

    Responder = Callable[[RecordedRequest], Reply]

    class FakeEndpoint:   # context manager
        def __init__(self, responder: Responder | list[Reply], *, served_model="glm-fake",
                     context_length: int | None = 131072, port: int = 0,
                     owned_by: str = "fake", apis=("chat", "responses", "anthropic"))
        url: str                       # "http://127.0.0.1:PORT"
        requests: list[RecordedRequest]
        errors: list[str]              # unexpected requests (script exhausted, bad JSON)
        def assert_consumed(self) -> None

A list of replies is a strict script: consumed in order; an extra request gets HTTP 500 and is
recorded in ``errors``. A responder should be a pure function of the request (content-based) so
that a killed-and-resumed client sees the same answers whatever the order.

Run as its own process (for chaos and supervisor tests)::

    python -m solver.testing.fake_endpoint --port N --responder module:callable [--served-model M]

prints ``READY <url>`` once listening and exits cleanly on SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import signal
import socket
import struct
import sys
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from solver.testing import fake_wire as wire
from solver.testing.fake_wire import Fault, Reply

__all__ = ["FakeEndpoint", "Fault", "RecordedRequest", "Reply", "RequestObserver", "Responder"]

_API_BY_PATH = {
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
    "/v1/messages": "anthropic",
}


def _text_of(content: Any) -> str:
    """Concatenated text of a message content in any of the three protocols."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
            elif isinstance(part, str):
                out.append(part)
        return "".join(out)
    return ""


@dataclass
class RecordedRequest:
    api: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: dict[str, Any] = field(default_factory=dict)

    @property
    def model(self) -> str:
        return str(self.json.get("model", ""))

    @property
    def stream(self) -> bool:
        return bool(self.json.get("stream", False))

    def _messages(self) -> list[dict[str, Any]]:
        if self.api == "responses":
            items = self.json.get("input", [])
            if isinstance(items, str):
                return [{"role": "user", "content": items}]
            return [i for i in items if isinstance(i, dict) and "role" in i]
        return [m for m in self.json.get("messages", []) if isinstance(m, dict)]

    def text_of_role(self, *roles: str) -> str:
        return "".join(_text_of(m.get("content")) for m in self._messages() if m["role"] in roles)

    @property
    def system_text(self) -> str:
        if self.api == "anthropic":
            return _text_of(self.json.get("system", ""))
        head = str(self.json.get("instructions") or "") if self.api == "responses" else ""
        return head + self.text_of_role("system", "developer")

    @property
    def user_text(self) -> str:
        return self.text_of_role("user")

    @property
    def offered_tools(self) -> list[str]:
        """The names of the tools the request offers, whatever its protocol."""
        names = []
        for tool in self.json.get("tools") or []:
            if isinstance(tool, dict):
                function = tool.get("function")
                named = function if isinstance(function, dict) else tool
                names.append(str(named.get("name", "")))
        return names

    @property
    def tool_choice(self) -> Any:
        return self.json.get("tool_choice")

    @property
    def tool_results(self) -> list[str]:
        """The contents of the tool results the request carries back to the model, in order:
        Chat's ``tool`` messages, Responses' ``function_call_output`` items, Anthropic's
        ``tool_result`` blocks."""
        found: list[str] = []
        if self.api == "responses":
            items = self.json.get("input")
            for item in items if isinstance(items, list) else []:
                if isinstance(item, dict) and item.get("type") == "function_call_output":
                    found.append(_text_of(item.get("output")))
            return found
        for message in self._messages():
            if self.api == "chat" and message.get("role") == "tool":
                found.append(_text_of(message.get("content")))
            content = message.get("content")
            if self.api == "anthropic" and isinstance(content, list):
                found.extend(
                    _text_of(block.get("content"))
                    for block in content
                    if isinstance(block, dict) and block.get("type") == "tool_result"
                )
        return found


Responder = Callable[[RecordedRequest], Reply]


class RequestObserver(Protocol):
    """Watches a fake's requests (a worker stand-in's counters): ``started`` when a request
    arrives, ``ended`` when its answer was sent whole (``completed``) or cut; ``metrics`` is the
    text ``GET /metrics`` answers."""

    def started(self, request: RecordedRequest) -> None: ...

    def ended(self, request: RecordedRequest, *, completed: bool) -> None: ...

    def metrics(self) -> str: ...


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # the default backlog of 5 resets connections sent all at once
    fake: FakeEndpoint

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up (a killed solver, a closed keep-alive connection) is normal
        # here; socketserver would print a traceback to stderr, which CLI tests capture.
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):
            return
        self.fake.errors.append(f"handler error: {type(error).__name__}: {error}")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def setup(self) -> None:
        super().setup()
        # no Nagle: each scripted frame leaves at once, as a token server's would
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        self.server.fake._track(self.connection, add=False)
        with contextlib.suppress(OSError):
            super().finish()

    # ------------------------------------------------------------ GET

    def do_GET(self) -> None:
        fake = self.server.fake
        path = self.path.split("?", 1)[0]
        if path in ("/health", "/ready"):
            self._send_json(200, {"status": "ok"})
        elif path == "/metrics" and fake.observer is not None:
            self._send_text(fake.observer.metrics())
        elif path == "/v1/models":
            model: dict[str, Any] = {
                "id": fake.served_model,
                "object": "model",
                "owned_by": fake.owned_by,
            }
            if fake.context_length is not None:
                model["max_model_len"] = fake.context_length
            self._send_json(200, {"object": "list", "data": [model]})
        else:
            self._send_json(404, {"error": {"message": f"no route {path}", "code": 404}})

    # ------------------------------------------------------------ POST

    def do_POST(self) -> None:
        fake = self.server.fake
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        api = _API_BY_PATH.get(path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        if api is None or api not in fake.apis:
            self._send_json(404, {"error": {"message": f"no route {path}", "code": 404}})
            return
        try:
            parsed = json.loads(body)
            if not isinstance(parsed, dict):
                raise ValueError("body is not a JSON object")
        except ValueError as exc:
            fake._record_error(f"{path}: bad JSON body: {exc}")
            self._send_json(400, wire.chat_error(f"bad JSON body: {exc}", 400))
            return
        required = "input" if api == "responses" else "messages"
        if required not in parsed:
            # as a real server refuses it (the solver's preflight posts an empty object):
            # not a request of the script
            self._send_json(400, wire.chat_error(f"field required: {required}", 400))
            return
        request = RecordedRequest(api=api, path=path, headers=headers, body=body, json=parsed)
        reply = fake._reply_for(request)
        if reply is None:
            self._send_json(500, wire.chat_error("fake endpoint: unexpected request", 500))
            return
        observer = fake.observer
        if observer is None:
            self._answer(request, reply)
            return
        observer.started(request)
        completed = False
        try:
            completed = self._answer(request, reply)
        finally:
            observer.ended(request, completed=completed)

    def _answer(self, request: RecordedRequest, reply: Reply) -> bool:
        """Send the reply; True when it went out whole."""
        fake = self.server.fake
        fault = reply.fault or Fault()
        if fault.prefill_delay and fake._sleep(fault.prefill_delay):
            return False
        if fault.status is not None:
            message = fault.message or f"fake endpoint error {fault.status}"
            encode = {"chat": wire.chat_error, "responses": wire.responses_error}.get(
                request.api, wire.anthropic_error
            )
            extra = {}
            if fault.retry_after is not None:
                extra["Retry-After"] = f"{fault.retry_after:g}"
            self._send_json(fault.status, encode(message, fault.status), extra)
            return False
        rid = request.headers.get("x-request-id") or uuid.uuid4().hex[:16]
        prompt_chars = len(request.system_text) + len(request.user_text)
        model = fake.served_model
        if not request.stream and reply.raw_chunks is None:
            maker = {
                "chat": wire.chat_body,
                "responses": wire.responses_body,
                "anthropic": wire.anthropic_body,
            }[request.api]
            return self._send_json(
                200, maker(reply, rid=rid, model=model, prompt_chars=prompt_chars)
            )
        if reply.raw_chunks is not None:
            frames = list(reply.raw_chunks)
        elif request.api == "chat":
            options = request.json.get("stream_options") or {}
            include_usage = bool(options.get("include_usage"))
            frames = wire.chat_stream(
                reply, rid=rid, model=model, prompt_chars=prompt_chars, usage=include_usage
            )
        elif request.api == "responses":
            frames = wire.responses_stream(reply, rid=rid, model=model, prompt_chars=prompt_chars)
        else:
            frames = wire.anthropic_stream(reply, rid=rid, model=model, prompt_chars=prompt_chars)
        return self._stream(request.api, frames, fault, reply.chunk_delay)

    def _stream(self, api: str, frames: list[bytes], fault: Fault, delay: float) -> bool:
        fake = self.server.fake
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("X-Request-ID", f"srv-{uuid.uuid4().hex[:12]}")
        self.end_headers()
        try:
            for sent in range(len(frames) + 1):
                if fault.reset_after_chunks == sent:
                    self._reset()
                    return False
                if fault.truncate_after_chunks == sent:
                    self._write_chunk(b"")
                    self.close_connection = True
                    return False
                if fault.error_event_after_chunks == sent:
                    self._write_chunk(wire.in_stream_error(api))
                    self._write_chunk(b"")
                    self.close_connection = True
                    return False
                if fault.malformed_json_after_chunks == sent:
                    self._write_chunk(b'data: {"choices":[{"delta":{"content":"x"\n\n')
                if fault.stall_after_chunks == sent and fake._sleep(fault.stall_seconds):
                    self.close_connection = True
                    return False
                if sent == len(frames):
                    break
                if delay and sent and fake._sleep(delay):
                    return False
                self._write_chunk(frames[sent])
            self._write_chunk(b"")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            return False
        return True

    def _write_chunk(self, data: bytes) -> None:
        # one HTTP chunk per frame, flushed, so the client sees the scripted boundaries
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _reset(self) -> None:
        # SO_LINGER 0 makes close() send RST instead of FIN: a connection reset for the client
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    def _send_json(self, status: int, obj: Any, extra: dict[str, str] | None = None) -> bool:
        data = json.dumps(obj, separators=(",", ":")).encode()
        return self._send_bytes(status, data, "application/json", extra)

    def _send_text(self, text: str) -> bool:
        return self._send_bytes(200, text.encode(), "text/plain; version=0.0.4")

    def _send_bytes(
        self, status: int, data: bytes, content_type: str, extra: dict[str, str] | None = None
    ) -> bool:
        """True when the whole answer was written."""
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for key, value in (extra or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            return False
        return True


class FakeEndpoint:
    """See the module docstring."""

    def __init__(
        self,
        responder: Responder | list[Reply],
        *,
        served_model: str = "glm-fake",
        context_length: int | None = 131072,
        port: int = 0,
        owned_by: str = "fake",
        apis: tuple[str, ...] = ("chat", "responses", "anthropic"),
        observer: RequestObserver | None = None,
    ) -> None:
        """``owned_by``: what the models list names as the server ("sglang": a client then
        sends a thinking budget in SGLang's fields, which the responder may honour).
        ``apis``: the protocols served; another's path answers 404, as a server of one
        protocol answers. ``observer``: told of every request and its end, and answers
        ``GET /metrics``."""
        self.apis = apis
        self.observer = observer
        self.served_model = served_model
        self.owned_by = owned_by
        self.context_length = context_length
        self.requests: list[RecordedRequest] = []
        self.errors: list[str] = []
        self._script: list[Reply] | None = list(responder) if isinstance(responder, list) else None
        self._responder = None if isinstance(responder, list) else responder
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._connections: set[socket.socket] = set()
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.fake = self
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def __enter__(self) -> FakeEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._closing.is_set():
            return
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            live = list(self._connections)
        for conn in live:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)

    def assert_consumed(self) -> None:
        with self._lock:
            left = len(self._script) if self._script is not None else 0
            errors = list(self.errors)
        assert not errors, f"fake endpoint saw unexpected requests: {errors}"
        assert left == 0, f"fake endpoint: {left} scripted replies were never requested"

    # ------------------------------------------------------------ used by the handler

    def _reply_for(self, request: RecordedRequest) -> Reply | None:
        with self._lock:
            self.requests.append(request)
            if self._script is None:
                assert self._responder is not None
                responder = self._responder
            elif self._script:
                return self._script.pop(0)
            else:
                self.errors.append(f"unexpected request #{len(self.requests)} to {request.path}")
                return None
        return responder(request)

    def _record_error(self, message: str) -> None:
        with self._lock:
            self.errors.append(message)

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _sleep(self, seconds: float) -> bool:
        """Wait, waking early when the endpoint closes; True when it closed."""
        return self._closing.wait(seconds)


def _load_responder(spec: str) -> Responder:
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise SystemExit(f"--responder must be module:callable, got {spec!r}")
    responder = getattr(importlib.import_module(module_name), attr)
    if not callable(responder):
        raise SystemExit(f"{spec} is not callable")
    return responder  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m solver.testing.fake_endpoint")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--responder", required=True, help="module:callable")
    parser.add_argument("--served-model", default="glm-fake")
    parser.add_argument("--context-length", type=int, default=131072)
    args = parser.parse_args(argv)
    responder = _load_responder(args.responder)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with FakeEndpoint(
        responder,
        served_model=args.served_model,
        context_length=args.context_length,
        port=args.port,
    ) as fake:
        print(f"READY {fake.url}", flush=True)
        while not stop.wait(0.2):
            pass
    return 0


def echo_responder(request: RecordedRequest) -> Reply:
    """A content-based responder for process mode: thinks briefly, then echoes the user text."""
    user = request.user_text
    return Reply(reasoning=f"The user said {len(user)} characters.", text=f"echo: {user}")


if __name__ == "__main__":
    sys.exit(main())
