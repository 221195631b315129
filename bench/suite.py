"""How the test suite's settings change its wall time: scratch on disk or in RAM, and how
pytest-xdist hands tests to its workers.

``python bench/suite.py [--rounds N] [--workers N] [TEST PATH ...]`` runs the same tests once
per variant per round, the variants taking turns so that a change of machine load hits them
alike, and prints the median wall time of each with its ratio to the first. The default tests
are the ones that write runs (the loop, the audit, the store, the lab) but for two single long
tests; pass paths to time others.

Variants: ``disk`` is pytest's default scratch (the system's temporary directory) with
``--dist load``; ``ram`` puts the scratch on ``/dev/shm`` (``TMPDIR``); ``ram+worksteal`` also
lets idle workers take queued tests from busy ones, as ``make test`` runs the suite.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TESTS = ("tests/loop", "tests/audit", "tests/store", "tests/lab")
# The chaos kills and the embedded model are single long tests: with them the wall time is
# theirs, whatever the variant.
DEFAULT_IGNORE = ("tests/loop/test_resume.py", "tests/loop/test_local_solve.py")
MARKS = "not long and not soak and not serial and not local_model"


@dataclass(frozen=True)
class Variant:
    name: str
    tmpdir: str | None
    dist: str


VARIANTS = (
    Variant("disk", None, "load"),
    Variant("ram", "/dev/shm", "load"),
    Variant("ram+worksteal", "/dev/shm", "worksteal"),
)


def run_once(variant: Variant, tests: list[str], workers: int) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if k != "TMPDIR"}
    if variant.tmpdir is not None:
        env["TMPDIR"] = variant.tmpdir
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", MARKS]
    cmd += ["-n", str(workers), "--dist", variant.dist, *tests]
    if tests == list(DEFAULT_TESTS):
        cmd += [f"--ignore={path}" for path in DEFAULT_IGNORE]
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "no output"
    if done.returncode != 0:
        raise SystemExit(f"{variant.name}: pytest exited {done.returncode}: {summary}")
    return wall, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tests", nargs="*", default=list(DEFAULT_TESTS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    if not os.access("/dev/shm", os.W_OK):
        print("/dev/shm is not writable here: only the disk variant can run", file=sys.stderr)
        return 2
    walls: dict[str, list[float]] = {v.name: [] for v in VARIANTS}
    summaries: dict[str, str] = {}
    for round_no in range(args.rounds):
        # Each round starts with a different variant, so none always runs first.
        turn = VARIANTS[round_no % len(VARIANTS) :] + VARIANTS[: round_no % len(VARIANTS)]
        for variant in turn:
            wall, summaries[variant.name] = run_once(variant, args.tests, args.workers)
            walls[variant.name].append(wall)
            print(f"round {round_no + 1}: {variant.name:<14} {wall:7.1f} s", file=sys.stderr)
    first = statistics.median(walls[VARIANTS[0].name])
    print(f"tests: {' '.join(args.tests)}; {args.workers} workers; {args.rounds} rounds")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    print(f"{'variant':<15} {'median s':>9} {'min..max s':>15} {'ratio':>7}  pytest")
    for variant in VARIANTS:
        times = walls[variant.name]
        median = statistics.median(times)
        spread = f"{min(times):.1f}..{max(times):.1f}"
        print(
            f"{variant.name:<15} {median:9.1f} {spread:>15} {median / first:6.2f}x  "
            f"{summaries[variant.name]}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
