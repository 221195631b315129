"""Proxy overhead, side by side in one run: direct to a loopback upstream, through this proxy,
and through LiteLLM's proxy.

    python bench/proxy.py [--seconds 5] [--rounds 2] [--concurrency 1,64] [--no-litellm]
                          [--large-event-mb 16]

Every target is its own process; the client is this process. The upstream is a fake Chat
Completions server (``--serve-fake``, asyncio) that streams 200 content events and a finish
event, then ``[DONE]``, as fast as it can.
Per cell (concurrency x target): closed-loop workers, each with its own httpx client and one
keep-alive connection; rounds alternate the target order; a window of ``--seconds`` is
measured after a warm-up. Reported: time to first content (p50, p99; "added" = minus direct),
SSE events received per second, and CPU of the target process per event (from /proc).

The large-event rows: ``--large-clients`` (8) workers stream ordinary answers, alone and
then while one more client (in its own thread) keeps asking for an answer that is one content
event of ``--large-event-mb`` MB; their time to first content is compared, direct to the
upstream (what the big event costs the machine and the client) and through the proxy (what it
costs the proxy's other clients). ``--concurrency ""`` runs only these rows.

LiteLLM runs from a throwaway venv (default <tempdir>/olys-bench-litellm, created and filled with
``pip install 'litellm[proxy]'`` on first use, never a project dependency) with
``LITELLM_MASTER_KEY``, ``LITELLM_LOCAL_MODEL_COST_MAP=True`` and no database. All traffic stays
on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import httpx

EVENTS = 200
ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")

# ---------------------------------------------------------------- the fake upstream


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _large_frames(megabytes: int) -> list[bytes]:
    """One content event of ``megabytes`` MB, then the finish and [DONE], in 64 KiB chunks."""
    head = {"id": "chatcmpl-big", "object": "chat.completion.chunk", "created": 0,
            "model": "fake"}  # fmt: skip
    text = "x" * (megabytes << 20)
    choice = {"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}
    finish = {"index": 0, "delta": {}, "finish_reason": "stop"}
    body = (
        b"data: " + json.dumps({**head, "choices": [choice]}).encode() + b"\n\n"
        + b"data: " + json.dumps({**head, "choices": [finish]}).encode() + b"\n\n"
        + b"data: [DONE]\n\n"
    )  # fmt: skip
    step = 1 << 16
    return [_chunked(body[i : i + step]) for i in range(0, len(body), step)] + [b"0\r\n\r\n"]


def _stream_frames() -> list[bytes]:
    head = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
            "model": "fake"}  # fmt: skip
    words = ["the ", "cat ", "sat ", "on ", "a mat"]
    frames = []
    for i in range(EVENTS):
        delta: dict[str, str] = {"content": words[i % len(words)]}
        if i == 0:
            delta["role"] = "assistant"
        choice = {"index": 0, "delta": delta, "finish_reason": None}
        frames.append(b"data: " + json.dumps({**head, "choices": [choice]}).encode() + b"\n\n")
    finish = {"index": 0, "delta": {}, "finish_reason": "stop"}
    frames.append(b"data: " + json.dumps({**head, "choices": [finish]}).encode() + b"\n\n")
    frames.append(b"data: [DONE]\n\n")
    return [_chunked(f) for f in frames] + [b"0\r\n\r\n"]


_BODY = json.dumps({
    "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "fake",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "the cat sat"},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
}).encode()  # fmt: skip


class _FakeProtocol(asyncio.Protocol):
    frames = _stream_frames()
    large: ClassVar[list[bytes]] = []  # set by --serve-fake from --large-event-mb
    stream_head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            self.answer(head.split(" ", 2)[1], body)

    def answer(self, path: str, body: bytes) -> None:
        transport = self.transport
        write = transport.write
        if path.endswith("/models"):
            data = b'{"object":"list","data":[{"id":"fake","object":"model"}]}'
            write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d"
                  b"\r\n\r\n%s" % (len(data), data))  # fmt: skip
            return
        if b'"stream":true' in body.replace(b" ", b""):
            write(self.stream_head)
            frames = self.large if b"LARGE-EVENT" in body else self.frames
            for frame in frames:  # one write per event, as a model server does
                if transport.is_closing():
                    return
                write(frame)
            return
        write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d"
              b"\r\n\r\n%s" % (len(_BODY), _BODY))  # fmt: skip


async def _serve_fake(port: int, large_mb: int) -> None:
    _FakeProtocol.large = _large_frames(large_mb)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_FakeProtocol, "127.0.0.1", port)
    print("READY", flush=True)
    async with server:
        await server.serve_forever()


# ---------------------------------------------------------------- processes


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_http(url: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"bench: {url} did not come up")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def _litellm(port: int, upstream: str, venv: Path, key: str) -> subprocess.Popen[bytes] | None:
    exe = venv / "bin" / "litellm"
    if not exe.exists():
        print(f"bench: installing litellm[proxy] into {venv} (one time)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        done = subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", "litellm[proxy]"], check=False
        )
        if done.returncode != 0 or not exe.exists():
            print("bench: litellm could not be installed; reporting without it", file=sys.stderr)
            return None
    config = venv / "bench-config.yaml"
    config.write_text(
        "model_list:\n  - model_name: fake\n    litellm_params:\n      model: openai/fake\n"
        f"      api_base: {upstream}/v1\n      api_key: sk-fake\n"
        "litellm_settings:\n  set_verbose: false\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(LITELLM_LOG="ERROR", LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_MODE="PRODUCTION",
               LITELLM_TELEMETRY_DISABLED="true", LITELLM_MASTER_KEY=key)  # fmt: skip
    process = subprocess.Popen(
        [str(exe), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    _wait_http(f"http://127.0.0.1:{port}/health/liveliness", 180)
    return process


# ---------------------------------------------------------------- the client

# one TLS context for all clients: building one per client costs ~100 ms of CPU each
_TLS = httpx.create_ssl_context()
_CONTENT = re.compile(rb'"content":\s*"[^"]')


@dataclass
class Cell:
    ttft: list[float] = field(default_factory=list)
    events: int = 0
    requests: int = 0
    errors: int = 0
    cpu: float = 0.0
    seconds: float = 0.0


async def _worker(url: str, body: bytes, headers: dict[str, str], window: tuple[float, float],
                  stop: float, cell: Cell) -> None:  # fmt: skip
    start, end = window
    limits = httpx.Limits(max_connections=1)
    async with httpx.AsyncClient(timeout=120, limits=limits, verify=_TLS) as client:
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            first: float | None = None
            count = 0
            try:
                request = client.build_request("POST", url, content=body, headers=headers)
                response = await client.send(request, stream=True)
                async for raw in response.aiter_raw():
                    now = time.perf_counter()
                    if first is None and _CONTENT.search(raw):
                        first = now - t0
                    if start <= now <= end:
                        count += raw.count(b"\n\n")
                await response.aclose()
            except httpx.HTTPError:
                cell.errors += 1
                continue
            cell.events += count
            if start <= t0 <= end:
                cell.requests += 1
                if first is not None:
                    cell.ttft.append(first)


def _body(prompt: str) -> bytes:
    return json.dumps({"model": "fake", "stream": True, "max_tokens": 256,
                       "messages": [{"role": "user", "content": prompt}]}).encode()  # fmt: skip


def _large_worker(url: str, stop: float, cell: Cell) -> None:
    """Asks for the large event until ``stop``, in its own thread (a client of its own: the
    measured clients must not share an event loop with a 16 MB read)."""
    body = _body("LARGE-EVENT")
    with httpx.Client(timeout=120, verify=_TLS) as client:
        while time.perf_counter() < stop:
            try:
                with client.stream("POST", url, content=body) as response:
                    for _ in response.iter_raw():
                        pass
            except httpx.HTTPError:
                cell.errors += 1
                continue
            cell.requests += 1


async def _run_cell(url: str, pid: int | None, concurrency: int, seconds: float,
                    headers: dict[str, str], large: Cell | None = None) -> Cell:  # fmt: skip
    """``large``: also run one client asking for the large event, counted there."""
    body = _body("hi")
    cell = Cell()
    settle = 1.0
    begin = time.perf_counter()
    window = (begin + settle, begin + settle + seconds)
    loop = asyncio.get_running_loop()
    cpu_task = loop.create_task(_cpu_window(pid, window, cell))
    workers = [_worker(url, body, headers, window, window[1], cell) for _ in range(concurrency)]
    thread = None
    if large is not None:
        thread = threading.Thread(target=_large_worker, args=(url, window[1], large))
        thread.start()
    await asyncio.gather(*workers)
    if thread is not None:
        await asyncio.to_thread(thread.join)
    await cpu_task
    cell.seconds = seconds
    return cell


async def _cpu_window(pid: int | None, window: tuple[float, float], cell: Cell) -> None:
    if pid is None:
        return
    await asyncio.sleep(max(window[0] - time.perf_counter(), 0))
    before = _cpu_seconds(pid)
    await asyncio.sleep(max(window[1] - time.perf_counter(), 0))
    cell.cpu = _cpu_seconds(pid) - before


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", default="1,64")
    parser.add_argument("--no-litellm", action="store_true")
    parser.add_argument("--large-event-mb", type=int, default=16)
    parser.add_argument("--large-clients", type=int, default=8)
    parser.add_argument(
        "--litellm-venv", type=Path, default=Path(tempfile.gettempdir()) / "olys-bench-litellm"
    )
    parser.add_argument("--serve-fake", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_fake is not None:
        asyncio.run(_serve_fake(args.serve_fake, args.large_event_mb))
        return 0
    processes: list[subprocess.Popen[bytes]] = []
    try:
        fake_port, proxy_port, litellm_port = _free_port(), _free_port(), _free_port()
        fake = subprocess.Popen([sys.executable, __file__, "--serve-fake", str(fake_port),
                                 "--large-event-mb", str(args.large_event_mb)],
                                stdout=subprocess.PIPE)  # fmt: skip
        processes.append(fake)
        assert fake.stdout is not None and fake.stdout.readline().strip() == b"READY"
        upstream = f"http://127.0.0.1:{fake_port}"
        scratch = tempfile.mkdtemp(prefix="olys-bench-proxy-")
        telemetry = Path(scratch) / "telemetry.sqlite"
        code = (
            "from pathlib import Path; "
            "from solver.proxy import quick_config, serve, with_overrides; "
            f"serve(with_overrides(quick_config('{upstream}/v1', 'chat', host='127.0.0.1', "
            f"port={proxy_port}, upstream_model='fake'), telemetry=Path('{telemetry}')))"
        )
        # the proxy prints one line per request on stderr, as `solver proxy` does: kept on (its
        # cost is part of the proxy's), sent nowhere
        proxy = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT,
                                 stderr=subprocess.DEVNULL)  # fmt: skip
        processes.append(proxy)
        _wait_http(f"http://127.0.0.1:{proxy_port}/health")
        key = "sk-" + secrets.token_hex(32)
        targets: list[tuple[str, str, int | None, dict[str, str]]] = [
            ("direct", f"{upstream}/v1/chat/completions", None, {}),
            ("proxy", f"http://127.0.0.1:{proxy_port}/v1/chat/completions", proxy.pid, {}),
        ]
        if not args.no_litellm:
            litellm = _litellm(litellm_port, upstream, args.litellm_venv, key)
            if litellm is not None:
                processes.append(litellm)
                targets.append(("litellm", f"http://127.0.0.1:{litellm_port}/v1/chat/completions",
                                litellm.pid, {"authorization": f"Bearer {key}"}))  # fmt: skip
        results: dict[tuple[int, str], list[Cell]] = {}
        for concurrency in [int(c) for c in args.concurrency.split(",") if c]:
            for _name, url, pid, headers in targets:  # warm-up
                asyncio.run(_run_cell(url, pid, min(concurrency, 8), 1.0, headers))
            for round_number in range(args.rounds):
                order = targets if round_number % 2 == 0 else list(reversed(targets))
                for name, url, pid, headers in order:
                    cell = asyncio.run(_run_cell(url, pid, concurrency, args.seconds, headers))
                    results.setdefault((concurrency, name), []).append(cell)
        if results:
            _report(results, [t[0] for t in targets])
        if args.large_event_mb:
            # direct first: what the large event costs the machine and the client alone
            for name, url, pid, _headers in targets[:2]:
                _large_event_row(name, url, pid, args)
    finally:
        for process in reversed(processes):
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
    return 0


def _report(results: dict[tuple[int, str], list[Cell]], names: list[str]) -> None:
    head = f"{'c':>3} {'target':<8} {'reqs':>6} {'err':>4} {'TTFT p50':>9} {'p99':>8} "
    print(head + f"{'added p50':>10} {'p99':>8} {'events/s':>10} {'x direct':>9} {'CPU/event':>10}")
    for concurrency in sorted({c for c, _ in results}):
        base = results[(concurrency, "direct")]
        base_ttft = [t for c in base for t in c.ttft]
        base_rate = sum(c.events for c in base) / sum(c.seconds for c in base)
        for name in names:
            cells = results[(concurrency, name)]
            ttft = [t for c in cells for t in c.ttft]
            rate = sum(c.events for c in cells) / sum(c.seconds for c in cells)
            events = sum(c.events for c in cells)
            cpu = sum(c.cpu for c in cells)
            per_event = f"{cpu / events * 1e6:.1f} us" if name != "direct" and events else "-"
            added50 = _pct(ttft, 0.5) - _pct(base_ttft, 0.5)
            added99 = _pct(ttft, 0.99) - _pct(base_ttft, 0.99)
            print(
                f"{concurrency:>3} {name:<8} {sum(c.requests for c in cells):>6} "
                f"{sum(c.errors for c in cells):>4} {_pct(ttft, 0.5):>7.2f}ms "
                f"{_pct(ttft, 0.99):>6.2f}ms {added50:>8.2f}ms {added99:>6.2f}ms "
                f"{rate:>10.0f} {rate / base_rate:>8.3f}x {per_event:>10}"
            )
    if "litellm" in names:
        for concurrency in sorted({c for c, _ in results}):
            ours = sum(c.events for c in results[(concurrency, "proxy")])
            theirs = sum(c.events for c in results[(concurrency, "litellm")]) or 1
            print(f"c={concurrency}: proxy streams {ours / theirs:.1f}x LiteLLM's events/s")
    print("events = SSE events received; CPU/event = target process CPU in the window / events")


def _large_event_row(target: str, url: str, pid: int | None, args: argparse.Namespace) -> None:
    """The ordinary clients' time to first content via ``target``, alone and beside one
    client streaming a ``--large-event-mb`` MB event (rounds alternate the order)."""
    quiet: list[Cell] = []
    loud: list[Cell] = []
    large: list[Cell] = []
    clients = args.large_clients
    for round_number in range(args.rounds):
        for with_large in (False, True) if round_number % 2 == 0 else (True, False):
            big = Cell() if with_large else None
            cell = asyncio.run(_run_cell(url, pid, clients, args.seconds, {}, big))
            (loud if with_large else quiet).append(cell)
            if big is not None:
                large.append(big)
    base = [t for c in quiet for t in c.ttft]
    beside = [t for c in loud for t in c.ttft]
    big_events = sum(c.requests for c in large)
    print(f"\nlarge event ({args.large_event_mb} MB), {clients} ordinary clients, {target}:")
    print(f"{'':<22} {'reqs':>6} {'TTFT p50':>9} {'p99':>8}")
    for name, cells, ttft in (("alone", quiet, base), ("beside the large event", loud, beside)):
        print(f"{name:<22} {sum(c.requests for c in cells):>6} {_pct(ttft, 0.5):>7.2f}ms "
              f"{_pct(ttft, 0.99):>6.2f}ms")  # fmt: skip
    ratio = _pct(beside, 0.5) / _pct(base, 0.5)
    print(f"p50 ratio beside/alone: {ratio:.2f}x; large answers completed: {big_events}, "
          f"errors: {sum(c.errors for c in large)}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
