"""The real gateway end to end: `solver eval` through smg 1.13.0 in front of SGLang worker
stand-ins, one worker SIGKILLed in the middle, and (``--policies``) how often each routing
policy keeps the calls that share a prompt prefix on one worker.

Part 1 (always): W workers (own processes) behind ``python -m smg.launch_router`` on
127.0.0.1; ``solver eval`` of P problems x R runs through it; as soon as the first worker has
answered one request whole and is streaming another, it is SIGKILLed. Then every run must
have finished, every run's audit must pass, and no answer a run had received whole may have
been asked again (``solver.testing.gateway.reissued``: the runs' journals against the
workers' ledgers, matched by X-Request-ID). The last line is::

    router: workers W, killed K, runs finished F/R, completed answers re-issued X, audit ok

Part 2 (``--policies``): the same eval (no kill) once per routing setting, and once on a
single worker, the bound no router can beat with this prompt layout (every request sees every
earlier prefix). Per setting: the share of prompt characters the workers served from their
prefix caches (the stand-ins count as SGLang's radix cache would, unbounded), that share over
the single worker's, smg's own decision counters (``smg_cache_aware_policy_branch_total``),
and the load spread (most requests on a worker over the fewest).

    python bench/router.py [--workers 3] [--problems 4] [--runs 1] [--policies]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from solver.testing.gateway import Gateway, read_ledger, reissued, smg_available

STATEMENTS = [
    "Prove that the sum of the squares of two odd integers is never a perfect square.",
    "Prove that the product of four consecutive integers plus one is a perfect square.",
    "Prove that there are infinitely many primes of the form 4k+3.",
    "Prove that n^5 - n is divisible by 30 for every integer n.",
    "Prove that the sum 1 + 1/2 + ... + 1/n is never an integer for n > 1.",
    "Prove that a tournament on n players has a Hamiltonian path.",
    "Prove that every integer greater than 11 is a sum of two composite numbers.",
    "Prove that sqrt(2) + sqrt(3) is irrational.",
]

# (label, smg arguments after --policy)
SETTINGS: list[tuple[str, list[str]]] = [
    ("cache_aware (defaults: threshold 0.3, balance 64/1.5)", ["--policy", "cache_aware"]),
    ("cache_aware threshold 0.1", ["--policy", "cache_aware", "--cache-threshold", "0.1"]),
    ("cache_aware threshold 0.5", ["--policy", "cache_aware", "--cache-threshold", "0.5"]),
    (
        "cache_aware threshold 0.1, balance 8/1.2",
        [
            "--policy",
            "cache_aware",
            "--cache-threshold",
            "0.1",
            "--balance-abs-threshold",
            "8",
            "--balance-rel-threshold",
            "1.2",
        ],
    ),
    ("prefix_hash", ["--policy", "prefix_hash"]),
    ("round_robin", ["--policy", "round_robin"]),
]


def write_set(path: Path, problems: int) -> Path:
    rows = [
        {"id": f"P{i + 1}", "statement": STATEMENTS[i % len(STATEMENTS)] + f" (#{i + 1})"}
        for i in range(problems)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def eval_argv(set_path: Path, out: Path, url: str, runs: int, problems: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "solver",
        "eval",
        str(set_path),
        "--out",
        str(out),
        "--endpoint",
        url + "/v1",
        "--runs",
        str(runs),
        "--candidates",
        "2",
        "--verifications",
        "2",
        "--accept",
        "2",
        "--graders",
        "2",
        "--concurrency-problems",
        str(problems),
        "--json",
    ]


def run_dirs(out: Path) -> list[Path]:
    return sorted(p.parent for p in out.glob("*/run-*/journal.jsonl"))


def finished(run_dir: Path) -> bool:
    return b'"type":"run.finished"' in (run_dir / "journal.jsonl").read_bytes()


def audits(run_dir: Path) -> bool:
    done = subprocess.run(
        [sys.executable, "-m", "solver", "audit", str(run_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode == 0


def kill_run(tmp: Path, workers: int, problems: int, runs: int) -> tuple[str, dict[str, Any]]:
    set_path = write_set(tmp / "set.jsonl", problems)
    out = tmp / "eval-kill"
    with Gateway(tmp / "gw-kill", workers=workers, chunk_delay=0.01) as gateway:
        victim = gateway.pool[0]
        child = subprocess.Popen(
            eval_argv(set_path, out, gateway.url, runs, problems),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120
        killed = 0
        while time.monotonic() < deadline and child.poll() is None:
            entries = victim.entries()
            ends = [e for e in entries if e["event"] == "end"]
            starts = [e for e in entries if e["event"] == "start"]
            if any(e["completed"] for e in ends) and len(starts) > len(ends):
                gateway.kill_worker(0)
                killed = 1
                break
            time.sleep(0.005)
        stdout, stderr = child.communicate(timeout=600)
        ledgers = [w.ledger for w in gateway.pool]
        cut = [
            e
            for e in victim.entries()
            if e["event"] == "start"
            and e["request_id"]
            not in {x["request_id"] for x in victim.entries() if x["event"] == "end"}
        ]
    dirs = run_dirs(out)
    done = [d for d in dirs if finished(d)]
    again = reissued([d / "journal.jsonl" for d in dirs], ledgers)
    audited = all(audits(d) for d in dirs)
    events = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    line = (
        f"router: workers {workers}, killed {killed}, runs finished {len(done)}/{problems * runs}, "
        f"completed answers re-issued {again}, audit {'ok' if audited else 'FAILED'}"
    )
    told = [e for e in events if e.get("event") == "attempt.failed"]
    facts = {
        "exit": child.returncode,
        "streams_cut": len(cut),
        "told": len(told),
        "told_victim": sum(1 for e in told if e.get("worker") == victim.url),
        "stderr": stderr[-500:] if child.returncode else "",
    }
    return line, facts


def prefix_share(ledgers: list[Path]) -> tuple[float, float, list[int]]:
    """The share of prompt characters served from the workers' caches, and the same share of
    what follows the system message (the problem, the proof, the findings: what is particular
    to one problem and one proof, rather than the role's instructions every problem shares)."""
    prompt = cached = own = own_cached = 0
    per_worker = []
    for ledger in ledgers:
        starts = [e for e in read_ledger(ledger) if e["event"] == "start"]
        per_worker.append(len(starts))
        for e in starts:
            prompt += e["prompt_chars"]
            cached += e["cached_chars"]
            own += e["prompt_chars"] - e["system_chars"]
            own_cached += max(0, e["cached_chars"] - e["system_chars"])
    return (cached / prompt if prompt else 0.0), (own_cached / own if own else 0.0), per_worker


def proof_together(out: Path) -> float:
    """Of the calls that read one proof version (its verifications, their reviews, its grades:
    call ids ``L0.v1.verify.0``, ``L0.v1.verify.0.review``, ``grade.L0.v1``), the share that
    went to the worker most of them went to, by the worker smg named for each attempt."""
    groups: dict[tuple[str, str], list[str]] = {}
    for run_dir in run_dirs(out):
        for line in (run_dir / "journal.jsonl").read_text().splitlines():
            record = json.loads(line)
            if record["type"] != "llm.completed":
                continue
            call = record["data"]["call_id"]
            parts = call.split(".")
            if parts[0] in ("grade", "evaluate") and len(parts) >= 3:
                proof = f"{parts[1]}.{parts[2]}"
            elif len(parts) >= 3 and parts[2] == "verify":
                proof = f"{parts[0]}.{parts[1]}"
            else:
                continue
            worker = record["data"]["telemetry"].get("routed_worker", "")
            groups.setdefault((str(run_dir), proof), []).append(worker)
    together = total = 0
    for workers in groups.values():
        together += max(workers.count(w) for w in set(workers))
        total += len(workers)
    return together / total if total else 0.0


def policy_row(
    tmp: Path, label: str, args: list[str], workers: int, problems: int, runs: int
) -> dict[str, Any]:
    set_path = write_set(tmp / "set.jsonl", problems)
    slug = "".join(ch if ch.isalnum() else "-" for ch in label)[:40]
    out = tmp / f"eval-{slug}"
    with Gateway(
        tmp / f"gw-{slug}",
        workers=workers,
        chunk_delay=0.002,
        policy=args[1],
        router_args=tuple(args[2:]),
    ) as gateway:
        done = subprocess.run(
            eval_argv(set_path, out, gateway.url, runs, problems),
            capture_output=True,
            text=True,
            timeout=900,
        )
        metrics = gateway.metrics()
        ledgers = [w.ledger for w in gateway.pool]
    share, own_share, per_worker = prefix_share(ledgers)
    branches = {
        key.split('branch="')[1].rstrip('"}'): int(value)
        for key, value in metrics.items()
        if key.startswith("smg_cache_aware_policy_branch_total")
    }
    return {
        "label": label,
        "exit": done.returncode,
        "share": share,
        "own_share": own_share,
        "together": proof_together(out),
        "per_worker": per_worker,
        "branches": branches,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--problems", type=int, default=4)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--policies", action="store_true", help="also compare routing settings")
    args = parser.parse_args()
    if not smg_available():
        print("smg is not installed: pip install 'smg==1.13.0' (the test extra has it)")
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-router-") as scratch:
        tmp = Path(scratch)
        if args.policies:
            rows = [
                policy_row(
                    tmp,
                    "one worker (the bound)",
                    ["--policy", "cache_aware"],
                    1,
                    args.problems,
                    args.runs,
                )
            ]
            bound = rows[0]["share"] or 1.0
            for label, smg_args in SETTINGS:
                rows.append(
                    policy_row(tmp, label, smg_args, args.workers, args.problems, args.runs)
                )
            print(
                f"prefix reuse: eval of {args.problems} problems x {args.runs} run(s), "
                f"{args.workers} workers (the bound: 1 worker)"
            )
            own_bound = rows[0]["own_share"] or 1.0
            print(
                f"{'setting':<44} {'exit':>4} {'cached':>7} {'x bound':>7} {'past sys':>8} "
                f"{'x bound':>7} {'one proof':>9} {'per worker':>11}  smg decisions"
            )
            for row in rows:
                spread = "/".join(str(n) for n in row["per_worker"])
                decisions = ", ".join(f"{k} {v}" for k, v in sorted(row["branches"].items()))
                print(
                    f"{row['label'][:44]:<44} {row['exit']:>4} {row['share']:>7.3f} "
                    f"{row['share'] / bound:>7.2f} {row['own_share']:>8.3f} "
                    f"{row['own_share'] / own_bound:>7.2f} {row['together']:>9.2f} "
                    f"{spread:>11}  {decisions or '-'}"
                )
            print()
        line, facts = kill_run(tmp, args.workers, args.problems, args.runs)
        print(
            f"kill run: eval exit {facts['exit']}, {facts['streams_cut']} stream(s) cut by the "
            f"kill; the progress view said {facts['told']} attempt(s) failed, "
            f"{facts['told_victim']} of them on the killed worker"
        )
        if facts["stderr"]:
            print(facts["stderr"])
        print(line)
    return 0 if line.endswith("audit ok") else 1


if __name__ == "__main__":
    raise SystemExit(main())
