"""Time `solver runs` on runs of 1k, 10k and 100k journal records, beside `solver status`.

For each size, a runs directory holds two runs built as bench/resume.py builds them (the loop's
real record types in a solve's proportions): one finished (a `run.finished` record and
`final/result.json` appended through the store) and one left unfinished. Times, in process,
the median of --repeat turns:

- list: `solver.run.listing.list_runs` on the directory (both runs);
- list finished: `read_run_row` on the finished run alone (manifest, result, journal tail);
- status finished / status unfinished: `solver.run.run_status` (folds the whole journal).

    python bench/runs_list.py [--sizes 1000,10000,100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.resume import build  # noqa: E402
from solver.run import run_status  # noqa: E402
from solver.run.listing import list_runs, read_run_row  # noqa: E402
from solver.store import RunStore  # noqa: E402


def finish(run_dir: Path) -> None:
    """Close the run as the loop does: final/result.json, then run.finished naming it."""
    with RunStore.open(run_dir) as store:
        result = {"outcome": "unsolved", "score": None, "tokens": {"total": 0}, "wall_s": 1.0}
        ref = store.write_final("result.json", json.dumps(result).encode())
        store.append(
            "run.finished",
            {"outcome": "unsolved", "final": {"result.json": ref.as_ref()}, "summary": {}},
        )


def median_s(work: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(
        f"{'records':>9} {'list s':>9} {'list finished s':>16} {'status finished s':>18} "
        f"{'status unfinished s':>20} {'status/list (finished)':>23}"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            runs = Path(tmp) / "runs"
            runs.mkdir()
            done, open_run = runs / "finished", runs / "unfinished"
            build(done, size)
            finish(done)
            build(open_run, size)
            assert read_run_row(done).status == "finished", read_run_row(done)
            listed = median_s(lambda: list_runs(runs), args.repeat)  # noqa: B023
            quick = median_s(lambda: read_run_row(done), args.repeat)  # noqa: B023
            status_done = median_s(lambda: run_status(done), args.repeat)  # noqa: B023
            status_open = median_s(lambda: run_status(open_run), args.repeat)  # noqa: B023
        print(
            f"{size:>9} {listed:>9.3f} {quick:>16.4f} {status_done:>18.3f} "
            f"{status_open:>20.3f} {status_done / quick:>22.0f}x"
        )


if __name__ == "__main__":
    main()
