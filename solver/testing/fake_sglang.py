"""A loopback stand-in for SGLang 0.5.23 in supervisor and benchmark tests, run as its own
process or in a thread.

It copies the health logic of SGLang 0.5.23's ``python/sglang/srt/entrypoints/http_server.py``
(``/ready`` at lines 714-718, ``health_generate`` at 722-799) and ``TokenizerManager.is_ready``:
the status is Starting until start-up ends, then Up. ``/health`` and ``/health_generate``
submit a one-token generation, poll every ``health_poll`` seconds (1 s in SGLang) and answer
200 as soon as *any* output has been received since the probe began (so a server busy with
other streams passes), setting the status to Up; after ``health_check_timeout``
(``SGLANG_HEALTH_CHECK_TIMEOUT``, 20 s by default) they answer 503 and set the status to
UnHealthy. The generation itself is not aborted, as in SGLang. ``/ready`` answers 200 only
while the status is Up (0.5.20+); ``/v1/models`` answers whatever the status. ``/metrics`` has the
token counters as SGLang updates them: ``sglang:realtime_tokens_total`` on every token (SGLang:
every scheduler iteration), ``sglang:generation_tokens_total``, ``sglang:prompt_tokens_total`` and,
with a speculative accept length, ``sglang:spec_verify_calls_total`` only when a request ends.

``/v1/chat/completions`` streams at an exact token rate: token k of a response leaves at
``t0 + k / rate`` where t0 is when token 0 left (an absolute schedule, so sleep overshoot does
not accumulate), one token per SSE chunk, then a usage chunk and ``[DONE]``. Every token,
streamed or for a health probe, passes through one "scheduler" that the control file can stall
or wedge.

Thinking budgets as SGLang takes them (``custom_logit_processor`` plus ``custom_params:
{"thinking_budget": N}``): with ``reasoning_tokens`` R a response first streams R tokens of
``reasoning_content``, then an answer of ``tokens`` tokens; a budget below R ends the
reasoning after N tokens, as the processor forcing ``</think>`` does. Started with
``custom_logit_processor=False`` the server refuses a request carrying a processor as SGLang
0.5.23 does without ``--enable-custom-logit-processor``
(``TokenizerManager._validate_one_request``): HTTP 400 for a non-stream request, an in-band
error chunk with code 400 in a stream. ``/server_info`` tells the flag as
``enable_custom_logit_processor`` unless ``server_info_flag=False`` (a server that does not
say). ``/v1/models`` says ``owned_by: "sglang"``; every request body received is kept in
``bodies``.

A control file (JSON, re-read on every request and token) changes behaviour while it runs::

    {"unresponsive": true}           every GET is dropped unanswered (the HTTP server hangs)
    {"stall_until": EPOCH}           no token leaves before that wall-clock time (an output stall)
    {"wedged": true}                 no token ever leaves and the counters freeze
    {"pid": N, ...}                  the keys above apply only in process N (survive a restart)
    {"health_generate_delay": 30}    /health_generate answers only after 30 s

Run::

    python -m solver.testing.fake_sglang --port N [--rate 200] [--tokens 64] [--control FILE]
        [--child-pid-file FILE]   # also start a grandchild process (to test tree stops)
        [--health-check-timeout S] [--health-poll S] [--accept-length A] [--router]

prints ``READY <url>`` once listening; SIGTERM stops it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # the default backlog of 5 resets connections at concurrency 16
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # clients closing pooled connections (AIPerf does at shutdown) are not errors here
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeSGLang:
    def __init__(
        self,
        *,
        port: int = 0,
        rate: float = 200.0,
        tokens: int = 64,
        ttft: float = 0.0,
        control: Path | None = None,
        served_model: str = "glm-fake",
        context_length: int = 131072,
        has_ready: bool = True,
        record: Path | None = None,
        health_check_timeout: float = 20.0,
        health_poll: float = 1.0,
        accept_length: float | None = None,
        router: bool = False,
        reasoning_tokens: int = 0,
        custom_logit_processor: bool = True,
        server_info_flag: bool = True,
    ) -> None:
        self.reasoning_tokens = reasoning_tokens
        self.custom_logit_processor = custom_logit_processor
        self.server_info_flag = server_info_flag
        self.bodies: list[dict[str, Any]] = []
        self.record = record
        self.health_check_timeout = health_check_timeout
        self.health_poll = health_poll
        self.accept_length = accept_length
        self.router = router
        self.status = "Up"  # start-up is over once the socket listens
        self.last_receive = 0.0  # when the "detokenizer" last produced anything
        self.realtime_tokens = 0
        self.generation_tokens = 0
        self.prompt_tokens = 0
        self.verify_calls = 0.0
        self._lock = threading.Lock()
        self.rate = rate
        self.tokens = tokens
        self.ttft = ttft
        self.control = control
        self.served_model = served_model
        self.context_length = context_length
        self.has_ready = has_ready
        self.closing = threading.Event()
        self.completions = 0
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.daemon_threads = True
        self._server.fake = self  # type: ignore[attr-defined]
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> FakeSGLang:
        self._thread.start()
        return self

    def close(self) -> None:
        self.closing.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeSGLang:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def settings(self) -> dict[str, Any]:
        if self.control is None:
            return {}
        try:
            loaded = json.loads(self.control.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(loaded, dict):
            return {}
        if "pid" in loaded and loaded["pid"] != os.getpid():
            return {k: v for k, v in loaded.items() if k == "health_generate_delay"}
        return loaded

    def emitting(self) -> bool:
        control = self.settings()
        if control.get("wedged"):
            return False
        return time.time() >= float(control.get("stall_until", 0))

    def emit_token(self) -> bool:
        """One token through the scheduler: waits out a stall; False when the server closes."""
        while not self.emitting():
            if self.closing.wait(0.01):
                return False
        with self._lock:
            self.last_receive = time.monotonic()
            self.realtime_tokens += 1
        return True

    def finish_request(self, prompt_tokens: int, tokens: int) -> None:
        """observe_one_finished_request: the per-request counters move only now."""
        with self._lock:
            self.prompt_tokens += prompt_tokens
            self.generation_tokens += tokens
            if self.accept_length:
                self.verify_calls += tokens / self.accept_length

    def health_generate(self) -> int:
        """http_server.health_generate: 200 once any output arrived after the probe began."""
        if self.status == "Starting":
            return 503
        tic = time.monotonic()
        # the probe's own one-token request; never aborted on timeout, as in SGLang
        threading.Thread(target=self.emit_token, daemon=True).start()
        while time.monotonic() < tic + self.health_check_timeout:
            if self.closing.wait(self.health_poll):
                return 503
            if self.last_receive > tic:
                self.status = "Up"
                return 200
        self.status = "UnHealthy"
        return 503

    def metrics_text(self) -> str:
        lines = [
            "# TYPE sglang:realtime_tokens_total counter",
            f'sglang:realtime_tokens_total{{model_name="{self.served_model}",mode="decode"}} '
            f"{self.realtime_tokens}",
            "# TYPE sglang:prompt_tokens_total counter",
            f'sglang:prompt_tokens_total{{model_name="{self.served_model}"}} {self.prompt_tokens}',
            "# TYPE sglang:generation_tokens_total counter",
            f'sglang:generation_tokens_total{{model_name="{self.served_model}"}} '
            f"{self.generation_tokens}",
        ]
        if self.accept_length:
            lines += [
                "# TYPE sglang:spec_verify_calls_total counter",
                f'sglang:spec_verify_calls_total{{model_name="{self.served_model}"}} '
                f"{self.verify_calls}",
            ]
        return "\n".join(lines) + "\n"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def setup(self) -> None:
        super().setup()
        # as uvicorn does: without it Nagle plus delayed ACKs hold the first chunk back ~40 ms
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @property
    def fake(self) -> FakeSGLang:
        return self.server.fake  # type: ignore[attr-defined,no-any-return]

    def do_GET(self) -> None:
        fake = self.fake
        control = fake.settings()
        path = self.path.split("?", 1)[0]
        if control.get("unresponsive"):
            self.close_connection = True  # dropped unanswered: the client sees no response
            return
        if fake.router:
            self._router_get(path)
        elif path == "/ready" and fake.has_ready:
            up = fake.status == "Up"
            self._json(200 if up else 503, {"status": "ok" if up else fake.status})
        elif path == "/v1/models":
            self._json(200, self._models())
        elif path in ("/health", "/health_generate"):
            delay = float(control.get("health_generate_delay", 0))
            if delay and fake.closing.wait(delay):
                return
            status = fake.health_generate()
            self._json(status, {})
        elif path == "/metrics":
            data = fake.metrics_text().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif path == "/server_info":
            info: dict[str, Any] = {"version": "0.0.0-fake", "context_length": fake.context_length}
            if fake.server_info_flag:
                info["enable_custom_logit_processor"] = fake.custom_logit_processor
            self._json(200, info)
        elif path == "/model_info":
            self._json(200, {"model_path": "fake/model", "reasoning_parser": "glm45"})
        else:
            self._json(404, {"error": f"no route {path}"})

    def _models(self) -> dict[str, Any]:
        fake = self.fake
        model = {
            "id": fake.served_model,
            "object": "model",
            "owned_by": "sglang",
            "max_model_len": fake.context_length,
        }
        return {"object": "list", "data": [model]}

    def _router_get(self, path: str) -> None:
        """The routes sglang-router 0.3.2 and smg 1.13.0 answer (probed live): /readiness,
        /liveness, /workers, /v1/models, /get_server_info (0.3.2's own); 404 on SGLang's /ready,
        /server_info and /model_info."""
        if path in ("/readiness", "/liveness", "/health"):
            self._json(200, {"status": "ok"})
        elif path == "/workers":
            self._json(200, {"workers": [{"url": "http://127.0.0.1:9", "model_id": "glm-fake"}]})
        elif path == "/v1/models":
            self._json(200, self._models())
        elif path == "/get_server_info":
            self._json(200, {"version": "0.0.0-fake-router"})
        else:
            self._json(404, {"error": f"no route {path}"})

    def do_POST(self) -> None:
        fake = self.fake
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path != "/v1/chat/completions":
            self._json(404, {"error": "no route"})
            return
        fake.bodies.append(body)
        refused = body.get("custom_logit_processor") and not fake.custom_logit_processor
        if refused and not body.get("stream"):
            self._json(400, {"object": "error", "message": _REFUSED, "code": 400})
            return
        tokens = int(body.get("max_tokens") or fake.tokens)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if refused:
            self._chunk({"error": {"message": _REFUSED, "type": "BadRequest", "code": 400}})
            self._write(b"data: [DONE]\n\n")
            self._write(b"")
            return
        thinking = _thinking_tokens(body, fake.reasoning_tokens)
        finish = "length"  # the plain stand-in decodes to max_tokens
        if fake.reasoning_tokens:
            # reasoning, then an answer of `tokens` tokens, unless max_tokens cuts it
            whole = thinking + fake.tokens
            finish = "stop" if whole <= tokens else "length"
            tokens = min(tokens, whole)
        if fake.ttft and fake.closing.wait(fake.ttft):
            return
        start = last_sent = 0.0
        try:
            for k in range(tokens):
                if k:
                    wait = start + k / fake.rate - time.perf_counter()
                    if wait > 0 and fake.closing.wait(wait):
                        return
                if not fake.emit_token():
                    return
                delta = {"reasoning_content": f" r{k}"} if k < thinking else {"content": f" t{k}"}
                self._chunk({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
                last_sent = time.perf_counter()
                if not k:
                    # the schedule starts when the first token has left, so a late first write
                    # (a busy machine) does not shorten the measured span
                    start = time.perf_counter()
            self._chunk({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
            usage = {"prompt_tokens": 8, "completion_tokens": tokens, "total_tokens": tokens + 8}
            self._chunk({"choices": [], "usage": usage})
            self._write(b"data: [DONE]\n\n")
            self._write(b"")
            fake.completions += 1
            fake.finish_request(8, tokens)
            if fake.record is not None and tokens > 1:
                # what the server really did, for checking what the client measured
                line = json.dumps({"tokens": tokens, "first": start, "last": last_sent})
                with fake.record.open("a") as handle:
                    handle.write(line + "\n")
        except (BrokenPipeError, ConnectionResetError):
            return

    def _chunk(self, obj: dict[str, Any]) -> None:
        head = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0}
        head["model"] = self.fake.served_model
        self._write(b"data: " + json.dumps(head | obj).encode() + b"\n\n")

    def _write(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


_REFUSED = (
    "The server is not configured to enable custom logit processor. "
    "Please set `--enable-custom-logit-processor` to enable this feature."
)


def _thinking_tokens(body: dict[str, Any], reasoning: int) -> int:
    """How many tokens of a response are reasoning: ``reasoning``, or fewer when a
    thinking-budget processor came with a budget below it."""
    params = body.get("custom_params")
    budget = params.get("thinking_budget") if isinstance(params, dict) else None
    if body.get("custom_logit_processor") and isinstance(budget, int) and budget >= 0:
        return min(reasoning, budget)
    return reasoning


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--control", type=Path)
    parser.add_argument("--child-pid-file", type=Path)
    parser.add_argument("--no-ready", action="store_true", help="no /ready route (old SGLang)")
    parser.add_argument("--record", type=Path, help="append each response's real send times")
    parser.add_argument("--health-check-timeout", type=float, default=20.0)
    parser.add_argument("--health-poll", type=float, default=1.0)
    parser.add_argument("--accept-length", type=float, default=None)
    parser.add_argument("--router", action="store_true", help="answer as sglang-router does")
    parser.add_argument("--reasoning-tokens", type=int, default=0)
    parser.add_argument(
        "--no-custom-logit-processor", action="store_true", help="refuse a thinking budget"
    )
    args = parser.parse_args()
    fake = FakeSGLang(
        port=args.port,
        rate=args.rate,
        tokens=args.tokens,
        control=args.control,
        has_ready=not args.no_ready,
        record=args.record,
        health_check_timeout=args.health_check_timeout,
        health_poll=args.health_poll,
        accept_length=args.accept_length,
        router=args.router,
        reasoning_tokens=args.reasoning_tokens,
        custom_logit_processor=not args.no_custom_logit_processor,
    )
    if args.child_pid_file is not None:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        args.child_pid_file.write_text(str(child.pid))
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    fake.start()
    print(f"READY {fake.url}", flush=True)
    done.wait()
    # the grandchild is deliberately left running, like a server that leaks worker processes:
    # stopping the whole tree is the supervisor's job
    fake.close()


if __name__ == "__main__":
    main()
