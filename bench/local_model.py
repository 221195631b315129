"""Benchmark the embedded SmolLM2 llama-server: start time and decode speed per thread setting.

All variants run in one process, side by side, with their requests interleaved round-robin, so
a machine whose load changes during the run (shared CI cores) affects every variant alike.
Each request is a fixed prompt at temperature 0 with the prompt cache off and a fixed number
of generated tokens; speeds are llama-server's own ``timings`` (prompt and decode tok/s) and the
client's wall time per request.

Usage: python bench/local_model.py [--rounds 5] [--tokens 64] [--variants t1,t2,t1-poll50,t2-poll50]
Needs `solver local install` first. Talks only to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from solver.local import ServerProcess, find_gguf, find_server, start_server, stop_server

# The project starts llama-server with --poll 0; "-poll50" restores llama.cpp's own default.
VARIANTS: dict[str, tuple[int, tuple[str, ...]]] = {
    "t1": (1, ()),
    "t2": (2, ()),
    "t1-poll50": (1, ("--poll", "50")),
    "t2-poll50": (2, ("--poll", "50")),
}
PROMPT = "Explain, step by step, why the sum of two odd numbers is even."


@dataclass
class Sample:
    start_s: float = 0.0
    decode: list[float] = field(default_factory=list)
    prompt: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)


def _request(server: ServerProcess, tokens: int) -> tuple[float, float, float]:
    body = {
        "model": server.model,
        "messages": [{"role": "user", "content": PROMPT}],
        "temperature": 0,
        "max_tokens": tokens,
        "cache_prompt": False,
        # Keep generating to exactly `tokens`, so every variant decodes the same length.
        "ignore_eos": True,
    }
    started = time.perf_counter()
    response = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=600)
    wall = time.perf_counter() - started
    response.raise_for_status()
    timings = response.json()["timings"]
    return timings["predicted_per_second"], timings["prompt_per_second"], wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--variants", default="t1,t2,t1-poll50,t2-poll50")
    args = parser.parse_args()
    names = [name.strip() for name in args.variants.split(",") if name.strip()]
    unknown = [name for name in names if name not in VARIANTS]
    if unknown:
        print(f"error: unknown variant(s) {unknown}; known: {sorted(VARIANTS)}", file=sys.stderr)
        return 2
    build, gguf = find_server(), find_gguf()
    if build is None or gguf is None:
        print("error: run `solver local install` first", file=sys.stderr)
        return 6

    samples = {name: Sample() for name in names}
    servers: dict[str, ServerProcess] = {}
    with tempfile.TemporaryDirectory(prefix="bench-local-") as scratch:
        try:
            for name in names:
                threads, extra = VARIANTS[name]
                started = time.perf_counter()
                servers[name] = start_server(
                    build.binary,
                    gguf,
                    Path(scratch) / f"{name}.log",
                    context_length=2048,
                    threads=threads,
                    extra_args=extra,
                    die_with_parent=True,
                )
                samples[name].start_s = time.perf_counter() - started
            for name in names:  # warm-up: page in the model, allocate buffers
                _request(servers[name], 8)
            for _ in range(args.rounds):
                for name in names:
                    decode, prompt, wall = _request(servers[name], args.tokens)
                    samples[name].decode.append(decode)
                    samples[name].prompt.append(prompt)
                    samples[name].wall.append(wall)
        finally:
            for server in servers.values():
                stop_server(server.pid, server.binary)

    base = statistics.median(samples[names[0]].decode)
    load = os.getloadavg()[0]
    print(
        f"llama-server {build.source_version}, {gguf.name}, {args.tokens} tokens x "
        f"{args.rounds} rounds, load average {load:.1f}, {os.cpu_count()} cores"
    )
    print(
        f"{'variant':<10} {'start s':>8} {'decode tok/s':>13} {'min..max':>13} "
        f"{'prompt tok/s':>13} {'wall s':>7} {'decode vs ' + names[0]:>14}"
    )
    for name in names:
        sample = samples[name]
        decode = statistics.median(sample.decode)
        spread = f"{min(sample.decode):.0f}..{max(sample.decode):.0f}"
        print(
            f"{name:<10} {sample.start_s:>8.2f} {decode:>13.1f} {spread:>13} "
            f"{statistics.median(sample.prompt):>13.1f} {statistics.median(sample.wall):>7.2f} "
            f"{decode / base:>13.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
