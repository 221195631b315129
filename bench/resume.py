"""Time to resume a run of 1k, 10k and 100k journal records.

Builds synthetic runs (with a real manifest) whose journals hold the loop's real record types
in the proportions a solve produces (plan, context, attempt start and end, completion,
artifact), then times:

- open: what `solver resume` does before it contacts the endpoint, in process: take the
  lock, repair and verify the chain, fold every record into the state;
- resume: the real command, `solver resume RUN --json` in a new process, from its start to
  its exit; the run's endpoint is a closed port on 127.0.0.1 and endpoint_wait_s is 0, so it
  does everything up to the endpoint probe, records the session and exits 3;
- status: `solver status RUN --json` in a new process, start to exit.

Prints a table; target <= 2 s at 100k (for open; the commands add the interpreter's start).

    python bench/resume.py [--sizes 1000,10000,100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from solver.config import resolve_settings  # noqa: E402
from solver.problems import Problem  # noqa: E402
from solver.records import (  # noqa: E402
    ArtifactPut,
    BlobLink,
    CallCompleted,
    CallPlanned,
    ContextBuilt,
    InputLink,
    LlmCompleted,
    LlmStarted,
)
from solver.run import build_manifest, manifest_blobs, open_run, resolve_endpoint  # noqa: E402
from solver.store import RunStore, canonical_json, utc_now  # noqa: E402
from solver.store.journal import line_hash  # noqa: E402


def build(run_dir: Path, records: int) -> None:
    """Create the run with the store, then write its journal lines directly (chained, canonical,
    without an fsync each: building is not what is measured)."""
    problem = Problem(id="bench", statement="Prove that $a^2 + b^2 \\ge 2ab$ for reals $a, b$.")
    resolved = resolve_settings(
        flags={"endpoint": f"http://127.0.0.1:{closed_port()}/v1", "retry.endpoint_wait_s": 0},
        env={},
        cwd=run_dir.parent,
    )
    endpoint, info = resolve_endpoint(resolved.settings)
    manifest = build_manifest(problem, None, resolved, endpoint, info, False, ["bench"], "bench")
    with RunStore.create(run_dir, manifest.to_json(), blobs=manifest_blobs(problem)) as store:
        ref = store.put_blob(b"x" * 2048)
        head, seq = store.head, store.next_seq
    link = BlobLink(blob=ref.digest, bytes=ref.size)
    kinds = [
        ArtifactPut(artifact="problem", kind="problem_statement", blob=link, producer="problem")
    ]
    lines: list[bytes] = []
    call = 0
    while len(kinds) < records:
        call_id = f"L{call % 8}.v{call // 8}.verify.{call % 5}"
        usage = {"input_tokens": 1000, "output_tokens": 5000}
        problem_link = InputLink(kind="problem_statement", artifact="problem", blob=ref.digest)
        kinds.extend(
            [
                CallPlanned(
                    call_id=call_id,
                    role="verifier",
                    variant="stepwise",
                    phase="solve",
                    lineage=f"L{call % 8}",
                    version=call // 8,
                ),
                ContextBuilt(
                    call_id=call_id,
                    role="verifier",
                    variant="stepwise",
                    templates={"verifier/user.j2": "sha256:" + "0" * 64},
                    inputs=link,
                    messages=link,
                    links={"problem_statement": [problem_link]},
                ),
                LlmStarted(
                    call_id=call_id,
                    attempt=1,
                    request_id=f"r{call}",
                    url="http://127.0.0.1:1/v1",
                    api="chat",
                    params={"max_tokens": 256000, "stream": True},
                    request=link,
                    max_tokens_cap=None,
                ),
                LlmCompleted(
                    call_id=call_id,
                    attempt=1,
                    response=link,
                    status=200,
                    finish_reason="stop",
                    usage=usage,
                    telemetry={"ttft_s": 1.0, "total_s": 60.0},
                ),
                CallCompleted(
                    call_id=call_id,
                    role="verifier",
                    finish_reason="stop",
                    truncated=False,
                    parsed_ok=True,
                    output=link,
                    text=link,
                    reasoning=None,
                    usage=usage,
                    facts={"verdict": "pass", "findings": []},
                ),
            ]
        )
        call += 1
    for record in kinds[:records]:
        line = canonical_json(
            {
                "data": record.data(),
                "prev": head,
                "seq": seq,
                "sess": 1,
                "t": utc_now(),
                "type": record.model_dump()["type"],
                "v": 1,
            }
        )
        head = line_hash(line)
        seq += 1
        lines.append(line + b"\n")
    with (run_dir / "journal.jsonl").open("ab") as handle:
        handle.write(b"".join(lines))


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def command_once(args: list[str], expect: int) -> float:
    """Seconds from the start of `solver ARGS` in a new process to its exit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOLVER_")}
    env["SOLVER_ENDPOINT_FILE"] = os.devnull + ".absent"
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "solver", *args], capture_output=True, env=env, check=False
    )
    elapsed = time.perf_counter() - started
    if done.returncode != expect:
        raise SystemExit(f"solver {args} exited {done.returncode}: {done.stderr[-800:]!r}")
    return elapsed


def resume_once(run_dir: Path) -> tuple[float, int]:
    started = time.perf_counter()
    store, state = open_run(run_dir)
    store.close()
    return time.perf_counter() - started, state.records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            run_dir = Path(tmp) / f"run-{size}"
            t0 = time.perf_counter()
            build(run_dir, size)
            build_s = time.perf_counter() - t0
            times, commands, statuses = [], [], []
            folded = 0
            for _ in range(args.repeat):  # the three take turns, so load hits them alike
                elapsed, folded = resume_once(run_dir)
                times.append(elapsed)
                commands.append(command_once(["resume", str(run_dir), "--json"], 3))
                statuses.append(command_once(["status", str(run_dir), "--json"], 0))
            journal = (run_dir / "journal.jsonl").stat().st_size
            rows.append(
                (
                    size,
                    folded,
                    journal,
                    build_s,
                    statistics.median(times),
                    min(times),
                    statistics.median(commands),
                    statistics.median(statuses),
                )
            )
        baseline = statistics.median(
            command_once(["--version"], 0) for _ in range(max(args.repeat, 3))
        )
    print(
        f"{'records':>9} {'folded':>8} {'journal MB':>10} {'built/s':>10} "
        f"{'open p50 s':>10} {'best s':>7} {'us/record':>9} {'target':>7} "
        f"{'resume s':>9} {'status s':>9}"
    )
    for size, folded, journal, build_s, median, best, command, status in rows:
        verdict = "ok" if median <= 2.0 * size / 100_000 or size < 100_000 else "MISSED"
        if size == 100_000:
            verdict = "ok" if median <= 2.0 else "MISSED"
        print(
            f"{size:>9} {folded:>8} {journal / 1e6:>10.1f} {size / build_s:>10.0f} "
            f"{median:>10.3f} {best:>7.3f} {median / size * 1e6:>9.1f} {verdict:>7} "
            f"{command:>9.3f} {status:>9.3f}"
        )
    print(f"\n`solver --version` (interpreter start and the CLI alone): {baseline:.3f} s")


if __name__ == "__main__":
    main()
