"""One orchestrator's capacity: how many concurrent long streams one `solver` process holds on
one core before its own CPU is the bottleneck, at the token rates GLM decodes at on SGLang.

The server is the SGLang stand-in (``python -m solver.testing.fake_sglang``, its own process,
pinned to the other core when there is one): every stream sends one token per SSE chunk at an
exact per-stream rate (token k leaves at t0 + k/rate), the worst case for a client (with MTP,
SGLang sends several tokens a chunk). The client is this process, pinned to one core: C
streams at once through the solver's ModelClient, each attempt's raw bytes into the run
store's own BlobWriter, every event folded (bench/ingest.py's ``DiskObserver``, what the run
loop does per chunk). Each level lasts about ``--seconds``: every stream is ``rate x seconds``
tokens long and all start together.

Per level: the client's CPU time (user + system) over the wall time (the share of one core it
used), CPU microseconds a token, the streams' achieved rate over the set one (median and
worst), the server's CPU share (from /proc), and the streams one core would hold at the set
rate before the client's CPU is used up: 1 s / (CPU a token x tokens a second a stream), an
extrapolation from the measured cost, stated as such. When the achieved rate falls below the
set one while neither process uses its core, the machine's other load is starving them (the
load average is printed), not the client's own work.

    python bench/orchestrator.py [--rates 30,60] [--concurrency 16,64,128,256] [--seconds 8]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from ingest import DiskObserver  # noqa: E402

from solver.llm import Endpoint, Message, ModelClient, Request  # noqa: E402

MODEL = "glm-fake"


def _pin(pid: int, cpu: int) -> None:
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(pid, {cpu})


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Level:
    rate: float
    concurrency: int
    wall: float
    cpu: float
    server_cpu: float
    tokens: int
    achieved: list[float]

    @property
    def share(self) -> float:
        return self.cpu / self.wall

    @property
    def per_token_us(self) -> float:
        return self.cpu / max(self.tokens, 1) * 1e6


async def _streams(url: str, concurrency: int, tokens: int, observer: DiskObserver) -> list[float]:
    request = Request(model=MODEL, messages=(Message.text("user", "Prove it."),), max_tokens=tokens)
    async with ModelClient(Endpoint(url + "/v1", "chat", MODEL)) as client:

        async def one() -> float:
            started = time.perf_counter()
            completion = await client.complete(request, observer)
            took = time.perf_counter() - started
            return completion.usage.output_tokens / took

        return list(await asyncio.gather(*(one() for _ in range(concurrency))))


def measure(url: str, server_pid: int, rate: float, concurrency: int, seconds: float) -> Level:
    tokens = max(2, int(rate * seconds))
    with tempfile.TemporaryDirectory(prefix="bench-orchestrator-") as tmp:
        observer = DiskObserver(Path(tmp))
        asyncio.run(_streams(url, 1, 4, observer))  # warm-up: imports, first connection
        server0 = _cpu_seconds(server_pid)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        achieved = asyncio.run(_streams(url, concurrency, tokens, observer))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        server = _cpu_seconds(server_pid) - server0
    return Level(rate, concurrency, wall, cpu, server / wall, tokens * concurrency, achieved)


def start_server(rate: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "solver.testing.fake_sglang", "--rate", str(rate)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.kill()
        raise RuntimeError(f"the stand-in did not start: {line!r}")
    return proc, line.split()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="30,60", help="tokens a second per stream")
    parser.add_argument("--concurrency", default="16,64,128,256")
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    levels = [int(c) for c in args.concurrency.split(",")]
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    client_cpu, server_cpu = cpus[0], cpus[-1]
    _pin(0, client_cpu)
    results: list[Level] = []
    for rate in rates:
        proc, url = start_server(rate)
        _pin(proc.pid, server_cpu)
        try:
            for concurrency in levels:
                results.append(measure(url, proc.pid, rate, concurrency, args.seconds))
        finally:
            proc.terminate()
            proc.wait(5)
    load = os.getloadavg()[0]
    print(
        f"client on cpu {client_cpu}, stand-in on cpu {server_cpu}; python "
        f"{sys.version.split()[0]}; load average {load:.1f}; ~{args.seconds:g} s a level"
    )
    print(
        f"{'tok/s':>5} {'C':>5} {'client CPU':>10} {'us/token':>8} {'median/set':>10} "
        f"{'worst/set':>9} {'server CPU':>10} {'streams a core':>14}"
    )
    for r in results:
        median = statistics.median(r.achieved) / r.rate
        worst = min(r.achieved) / r.rate
        # what one core would hold if all of it went to this per-token cost at the set rate
        capacity = 1e6 / (r.per_token_us * r.rate) if r.tokens else float("inf")
        print(
            f"{r.rate:>5.0f} {r.concurrency:>5} {r.share:>9.0%} {r.per_token_us:>8.1f} "
            f"{median:>10.3f} {worst:>9.3f} {r.server_cpu:>9.0%} {capacity:>14.0f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
