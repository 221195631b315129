"""The start-up cost of the code sandbox: a trivial script under bubblewrap vs a bare
``python3 -c pass``, side by side in one run.

Sides, taking turns, ``--repeat`` times each (median and 90th percentile):

- bare: ``/usr/bin/python3 -c pass`` in a new process, start to exit (subprocess.run);
- bare -s script: ``/usr/bin/python3 -s FILE`` with FILE holding ``pass``, as the sandbox
  starts it;
- sandbox, no Python: the sandbox's full command line with ``/usr/bin/true`` in place of the
  interpreter (namespaces, mounts, prlimit, our bounded reading): bubblewrap's own share;
- sandbox: ``solver.sandbox.run_python("pass")`` with the default limits, what a tool call
  pays before its code does anything;
- bare sympy / sandbox sympy: ``import sympy`` both ways, what a typical tool call pays.

    python bench/sandbox.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from solver.sandbox import Limits, run_python, sandbox_version  # noqa: E402
from solver.sandbox.probe import locate_bwrap, sandbox_uid  # noqa: E402
from solver.sandbox.process import execute  # noqa: E402

PYTHON = "/usr/bin/python3"


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    version = sandbox_version()
    bwrap = locate_bwrap()
    uid = sandbox_uid()
    limits = Limits()
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "main.py"
        script.write_text("pass\n")
        sides: dict[str, Callable[[], object]] = {
            "bare python3 -c pass": lambda: subprocess.run([PYTHON, "-c", "pass"], check=True),
            "bare python3 -s script": lambda: subprocess.run([PYTHON, "-s", script], check=True),
            "sandbox, /usr/bin/true": lambda: execute(
                "pass", limits, bwrap=bwrap, python="/usr/bin/true", sandbox_uid=uid
            ),
            "sandbox, python pass": lambda: run_python("pass", limits),
            "bare import sympy": lambda: subprocess.run([PYTHON, "-c", "import sympy"], check=True),
            "sandbox, import sympy": lambda: run_python("import sympy", limits),
        }
        times: dict[str, list[float]] = {name: [] for name in sides}
        for action in sides.values():  # one warm-up each: page cache, the probe
            action()
        for _ in range(args.repeat):
            for name, action in sides.items():
                times[name].append(timed(action))
    base = statistics.median(times["bare python3 -c pass"])
    sympy_base = statistics.median(times["bare import sympy"])
    print(
        f"{version.bubblewrap}, Python {version.python}, sympy {version.sympy};"
        f" {args.repeat} turns; load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'side':<26}{'p50 ms':>9}{'p90 ms':>9}{'x bare':>9}{'x same bare':>13}")
    for name, samples in times.items():
        ordered = sorted(samples)
        p50 = statistics.median(ordered)
        p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        same = sympy_base if "sympy" in name else base
        print(
            f"{name:<26}{p50 * 1000:>9.1f}{p90 * 1000:>9.1f}{p50 / base:>9.2f}{p50 / same:>13.2f}"
        )
    added = statistics.median(times["sandbox, python pass"]) - base
    print(f"the sandbox adds {added * 1000:.1f} ms to a Python start")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
