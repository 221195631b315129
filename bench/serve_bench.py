"""How exact is `solver serve bench`? Measured against paced fake servers, and beside AIPerf.

Each fake (solver/testing/fake_sglang.py, its own process on 127.0.0.1) streams every response at
an exact per-user rate (token k leaves at start + k/rate). The table compares, in one run and
side by side, the set rate with our P50/P90 per-user tok/s and the total with the ideal
C x rate. With --aiperf PATH (an `aiperf` executable, e.g. from a throwaway venv) AIPerf runs on
the same fake at the same concurrency and duration, and the ratio ours/AIPerf is printed.
AIPerf's builtin tokenizer needs tiktoken's o200k_base file offline: point TIKTOKEN_CACHE_DIR at
a directory holding it (docs/bench-serve.md says where one ships).

    .venv/bin/python bench/serve_bench.py [--rates 50,200] [--concurrency 1,4,16]
        [--duration 5] [--tokens 100] [--aiperf /tmp/aiperfvenv/bin/aiperf]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from solver.serve.bench import BenchOptions, LevelResult, load_dataset, run_bench  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def fake_server(rate: float, tokens: int) -> Iterator[str]:
    port = free_port()
    cmd = [sys.executable, "-m", "solver.testing.fake_sglang", "--port", str(port)]
    cmd += ["--rate", str(rate), "--tokens", str(tokens)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("READY"):
            raise SystemExit(f"fake server did not start: {line!r}")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def run_aiperf(
    aiperf: str, url: str, concurrency: int, duration: float, tokens: int
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [aiperf, "profile", "--model", "glm-fake", "--url", url]
        cmd += ["--endpoint-type", "chat", "--streaming", "--concurrency", str(concurrency)]
        cmd += ["--benchmark-duration", str(duration), "--benchmark-grace-period", "30"]
        cmd += ["--output-tokens-mean", str(tokens), "--use-server-token-count"]
        cmd += ["--tokenizer", "builtin", "--ui-type", "none", "--output-artifact-dir", tmp]
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=duration + 300, env=os.environ.copy()
        )
        if done.returncode != 0:
            return {"error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
        exported = next(Path(tmp).rglob("profile_export_aiperf.json"), None)
        if exported is None:
            return {"error": "no profile_export_aiperf.json"}
        data = json.loads(exported.read_text())
    per_user = data.get("output_token_throughput_per_user") or {}
    total = data.get("output_token_throughput") or {}
    return {"total": total.get("avg"), "p90": per_user.get("p90"), "p50": per_user.get("p50")}


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    cli.add_argument("--rates", default="50,200")
    cli.add_argument("--concurrency", default="1,4,16")
    cli.add_argument("--duration", type=float, default=5.0)
    cli.add_argument("--tokens", type=int, default=100)
    cli.add_argument("--aiperf", default=None, help="path of an aiperf executable")
    cli.add_argument("--json", type=Path, default=None, help="write the rows as JSON here")
    args = cli.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    levels = tuple(int(c) for c in args.concurrency.split(","))
    items = load_dataset(None, args.tokens)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for rate in rates:
        with fake_server(rate, args.tokens) as url:
            options = BenchOptions(concurrency=levels, duration=args.duration, grace=30)
            results: list[LevelResult] = run_bench([url], items, options)
            for level in results:
                row: dict[str, Any] = {
                    "rate": rate,
                    "c": level.concurrency,
                    "ours_p50": level.per_user_tok_s["p50"],
                    "ours_p90": level.per_user_tok_s["p90"],
                    "ours_total": level.total_output_tok_s,
                    "ideal_total": level.concurrency * rate,
                    "done": level.completed,
                    "failed": level.failed,
                    "errors": level.errors,
                }
                if args.aiperf:
                    row["aiperf"] = run_aiperf(
                        args.aiperf, url, level.concurrency, args.duration, args.tokens
                    )
                rows.append(row)
    print(f"solver serve bench vs set rate{' and AIPerf' if args.aiperf else ''}: "
          f"{args.duration:g} s per level, {args.tokens} tokens per response, "
          f"wall {time.perf_counter() - started:.0f} s")  # fmt: skip
    header = "rate  c   p50/rate  p90/rate  total/ideal   done fail"
    if args.aiperf:
        header += "  aiperf_p90  ours/aiperf p90  ours/aiperf total"
    print(header)
    for row in rows:
        p50, p90 = row["ours_p50"] / row["rate"], row["ours_p90"] / row["rate"]
        total = row["ours_total"] / row["ideal_total"]
        line = f"{row['rate']:>4g} {row['c']:>2}   {p50:>8.4f}  {p90:>8.4f}  {total:>11.4f}"
        line += f"   {row['done']:>4} {row['failed']:>4}"
        ai = row.get("aiperf") or {}
        if args.aiperf and ai.get("p90") and ai.get("total"):
            line += (
                f"  {ai['p90']:>10.2f}  {row['ours_p90'] / ai['p90']:>15.4f}"
                f"  {row['ours_total'] / ai['total']:>17.4f}"
            )
        elif args.aiperf:
            line += f"  aiperf failed: {ai.get('error')}"
        print(line)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
