"""Stream-ingest benchmark: how much client CPU one streamed chunk costs.

One loopback server (its own process, so its CPU is not counted) streams pre-built GLM-style
Chat Completions chunks as fast as it can, each SSE event in its own HTTP chunk as SGLang's
uvicorn sends them. At each concurrency, in one run, three clients read the same streams:

  (a) sdk    the openai SDK, iterating ``chat.completions.create(stream=True)`` and nothing else
  (b) ours   ModelClient.complete: normalisation, folding, SHA-256 and the raw bytes stored
             by the run store's own BlobWriter (durable, content-named) for every attempt
  (c) floor  httpx iterating the raw response bytes and doing nothing else

Reported: chunks/s (wall), CPU microseconds per chunk (this process: user + system), and the
ratios ours/sdk (rate) and ours/floor (CPU). Usage: ``python bench/ingest.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from solver.llm import (  # noqa: E402
    AttemptEnd,
    AttemptStart,
    Connection,
    Endpoint,
    Message,
    ModelClient,
    Request,
    RetryNotice,
    StreamEvent,
)
from solver.store.blobs import BlobStore, BlobWriter  # noqa: E402

MODEL = "glm-bench"

# ---------------------------------------------------------------- the loopback server


def build_frames(chunks: int) -> list[bytes]:
    """A GLM/SGLang-shaped stream: role chunk, reasoning, content, finish, usage, [DONE]."""
    head = {
        "id": "chatcmpl-bench0123456789",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": MODEL,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {
            "index": 0,
            "delta": delta,
            "logprobs": None,
            "finish_reason": finish,
            "matched_stop": None,
        }
        body = json.dumps({**head, "choices": [choice]}, separators=(",", ":"))
        return f"data: {body}\n\n".encode()

    words = [
        "Let",
        " the",
        " odd",
        " squares",
        " be",
        " (2a+1)^2",
        " and",
        " (2b+1)^2",
        ".",
        " Then",
        " their",
        " sum",
        " is",
        " 2",
        " mod",
        " 4",
        ",",
        " 你好",
        " x²",
    ]
    body_count = chunks - 4
    frames = [chunk({"role": "assistant", "content": ""})]
    for i in range(body_count):
        key = "reasoning_content" if i < body_count * 2 // 3 else "content"
        frames.append(chunk({key: words[i % len(words)]}))
    frames.append(chunk({}, "stop"))
    usage = {
        "prompt_tokens": 812,
        "completion_tokens": body_count,
        "total_tokens": 812 + body_count,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    frames.append(f"data: {json.dumps({**head, 'choices': [], 'usage': usage})}\n\n".encode())
    frames.append(b"data: [DONE]\n\n")
    return frames


def serve(port_out: Any, chunks: int) -> None:
    frames = build_frames(chunks)
    blob = b"".join(b"%x\r\n%s\r\n" % (len(f), f) for f in frames) + b"0\r\n\r\n"
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\nx-request-id: bench\r\n\r\n"
    )
    models = json.dumps(
        {"object": "list", "data": [{"id": MODEL, "object": "model", "max_model_len": 10_000_000}]}
    ).encode()
    models_reply = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(models), models)
    )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request_head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in request_head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                if length:
                    await reader.readexactly(length)
                writer.write(models_reply if request_head.startswith(b"GET") else head + blob)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=512)
        port_out.send(server.sockets[0].getsockname()[1])
        async with server:
            await server.serve_forever()

    asyncio.run(main())


# ---------------------------------------------------------------- the three clients

REQUEST_BODY = {
    "model": MODEL,
    "messages": [{"role": "user", "content": "Prove it."}],
    "max_tokens": 100_000,
    "stream": True,
}


class DiskObserver:
    """What the run loop does per attempt: the raw bytes go into the run's blob store (the real
    BlobWriter: buffered writes, temp file, fsync, rename, directory fsync), named by the
    digest the client computed while reading; events are counted."""

    def __init__(self, directory: Path) -> None:
        self.store = BlobStore(directory / "blobs")
        self.events = 0
        self.files: dict[str, BlobWriter] = {}

    def attempt_started(self, start: AttemptStart) -> BlobWriter:
        sink = self.store.writer(hashed=False)  # the client hashes every byte it reads
        self.files[start.request_id] = sink
        return sink

    def attempt_ended(self, start: AttemptStart, end: AttemptEnd) -> None:
        self.files.pop(start.request_id).commit("sha256:" + end.response_sha256)
        if end.error_kind is not None:
            raise RuntimeError(f"benchmark stream failed: {end.error_kind} {end.error_message}")

    def connection_opened(self, conn: Connection) -> None:
        return None

    def on_event(self, event: StreamEvent) -> None:
        self.events += 1

    def retry_scheduled(self, notice: RetryNotice) -> None:
        raise RuntimeError(f"benchmark stream retried: {notice.error_kind} {notice.message}")


async def run_sdk(url: str, concurrency: int, rounds: int) -> None:
    from openai import AsyncOpenAI

    http = httpx.AsyncClient(trust_env=False, timeout=60, limits=httpx.Limits(max_connections=None))
    client = AsyncOpenAI(base_url=url + "/v1", api_key="bench", max_retries=0, http_client=http)

    async def one() -> None:
        for _ in range(rounds):
            stream = await client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "Prove it."}],
                max_tokens=100_000,
                stream=True,
            )
            async for _chunk in stream:
                pass

    await asyncio.gather(*(one() for _ in range(concurrency)))
    await client.close()


async def run_ours(url: str, concurrency: int, rounds: int) -> None:
    request = Request(
        model=MODEL, messages=(Message.text("user", "Prove it."),), max_tokens=100_000
    )
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        observer = DiskObserver(Path(tmp))
        async with ModelClient(Endpoint(url, "chat", MODEL)) as client:

            async def one() -> None:
                for _ in range(rounds):
                    completion = await client.complete(request, observer)
                    if completion.finish_reason != "stop":
                        raise RuntimeError("benchmark stream did not finish")

            await asyncio.gather(*(one() for _ in range(concurrency)))


async def run_floor(url: str, concurrency: int, rounds: int) -> None:
    async with httpx.AsyncClient(
        trust_env=False, timeout=60, limits=httpx.Limits(max_connections=None)
    ) as http:

        async def one() -> None:
            for _ in range(rounds):
                async with http.stream(
                    "POST", url + "/v1/chat/completions", json=REQUEST_BODY
                ) as response:
                    async for _data in response.aiter_raw():
                        pass

        await asyncio.gather(*(one() for _ in range(concurrency)))


CLIENTS: dict[str, Callable[[str, int, int], Awaitable[None]]] = {
    "sdk": run_sdk,
    "ours": run_ours,
    "floor": run_floor,
}


@dataclass
class Result:
    client: str
    concurrency: int
    chunks: int
    wall_s: float
    cpu_s: float

    @property
    def rate(self) -> float:
        return self.chunks / self.wall_s

    @property
    def cpu_us(self) -> float:
        return self.cpu_s / self.chunks * 1e6


def measure(name: str, url: str, concurrency: int, rounds: int, chunks: int) -> Result:
    runner = CLIENTS[name]
    asyncio.run(runner(url, 1, 1))  # warm-up: imports, first connection
    cpu0, wall0 = time.process_time(), time.perf_counter()
    asyncio.run(runner(url, concurrency, rounds))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return Result(name, concurrency, concurrency * rounds * chunks, wall, cpu)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller run (smoke test)")
    parser.add_argument("--chunks", type=int, default=1000, help="chunks per response")
    args = parser.parse_args()
    chunks = args.chunks
    plan = {1: 10, 16: 2, 64: 1} if not args.quick else {1: 2, 16: 1, 64: 1}
    if args.quick:
        chunks = min(chunks, 200)
    receive, send = multiprocessing.Pipe(duplex=False)
    server = multiprocessing.Process(target=serve, args=(send, chunks), daemon=True)
    server.start()
    try:
        url = f"http://127.0.0.1:{receive.recv()}"
        results: list[Result] = []
        for concurrency, rounds in plan.items():
            for name in CLIENTS:
                results.append(measure(name, url, concurrency, rounds, chunks))
    finally:
        server.terminate()
        server.join(5)
    print(f"cpus={os.cpu_count()} python={sys.version.split()[0]} chunks/response={chunks}")
    print(f"{'c':>3} {'client':<6} {'chunks':>7} {'chunks/s':>10} {'CPU us/chunk':>13}")
    by_key = {(r.client, r.concurrency): r for r in results}
    for r in results:
        print(f"{r.concurrency:>3} {r.client:<6} {r.chunks:>7} {r.rate:>10.0f} {r.cpu_us:>13.1f}")
    print()
    print(f"{'c':>3} {'ours/sdk rate':>14} {'ours/floor CPU':>15} {'sdk/ours CPU':>13}")
    for concurrency in plan:
        ours, sdk, floor = (by_key[(n, concurrency)] for n in ("ours", "sdk", "floor"))
        print(
            f"{concurrency:>3} {ours.rate / sdk.rate:>14.2f} {ours.cpu_us / floor.cpu_us:>15.2f}"
            f" {sdk.cpu_us / ours.cpu_us:>13.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
