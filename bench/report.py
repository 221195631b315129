"""What `solver report` costs on runs of growing size, next to what `solver status` costs.

Makes real runs with the loop against the scripted fake endpoint on 127.0.0.1 (distinct proofs
of about 12 KB, reports of about 3 KB, every candidate failing its verifications so the run
spends its whole call budget), then times, on the same run directory:

- fold: what `solver status` does (read the journal, fold it into the state);
- markdown: `solver report RUN` (fold, per-call views, the selected proof, Markdown);
- html: `solver report RUN --html` (also every prompt, reasoning and response text, rendered).

Prints one table with the ratios to fold, and the HTML size next to the run's blob bytes.

    python bench/report.py [--calls 50,200,600] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from solver.config import resolve_settings  # noqa: E402
from solver.evaluation import quiet_progress  # noqa: E402
from solver.problems import Problem  # noqa: E402
from solver.report import load_report, render_html, render_markdown  # noqa: E402
from solver.run import read_state, start_run  # noqa: E402
from solver.testing import FakeEndpoint, RecordedRequest, role_of  # noqa: E402
from solver.testing.fake_endpoint import Reply  # noqa: E402

STEP = (
    "Since $a \\equiv b \\pmod{4}$ we get $\\frac{a^2+b^2}{2} \\ge ab$, and by induction on "
    "$n \\ge 3$ the claim $\\sum_{i=1}^{n} x_i^2 \\le n^2$ holds for every admissible $x_i$. "
)
_ATTEMPTS = itertools.count(1)
PROOF = "## Proof\n\n" + STEP * 60 + "FLAW here.\n\n## Final answer\n\nNot applicable\n"


def _json(payload: dict[str, object], size: int) -> Reply:
    analysis = "Checking each step in turn. " * (size // 28)
    return Reply(
        text=f"{analysis}\n```json\n{json.dumps(payload)}\n```",
        reasoning="r" * 400,
        chunk_chars=512,
    )


def never_accepted(request: RecordedRequest) -> Reply:
    role = role_of(request)
    if role in ("generator", "reviser"):
        # Distinct proofs, so no two prompts or responses share a blob (as in a real run).
        text = PROOF.replace("FLAW", f"Attempt {next(_ATTEMPTS)}. FLAW")
        return Reply(text=text, reasoning="thinking " * 200, chunk_chars=512)
    if role == "verifier":
        finding = {
            "id": "F1",
            "location": "FLAW here",
            "severity": "major",
            "explanation": f"Unjustified step number {len(request.user_text) % 97}.",
        }
        return _json({"findings": [finding], "verdict": "fail"}, 3000)
    if role == "reviewer":
        return _json(
            {
                "reviews": [
                    {"id": "F1", "decision": "confirmed", "severity": "major", "reason": "real"}
                ]
            },
            1500,
        )
    if role in ("grader", "evaluation"):
        return _json({"score": 2, "justification": "partial"}, 1500)
    if role == "reconcile":
        return _json({"score": 2, "justification": "decided"}, 800)
    return _json({"choice": "A", "reason": "best"}, 800)


def make_run(url: str, run_dir: Path, calls: int) -> None:
    problem = Problem(id="bench", statement="Prove that $a^2 + b^2 \\ge 2ab$ for reals $a, b$.")
    resolved = resolve_settings(
        flags={
            "endpoint": url + "/v1",
            "candidates": 8,
            "concurrency": 16,
            "acceptance.verifications": 5,
            "acceptance.max_failed_rounds": 1000,
            "acceptance.abandon_on_recurring": False,
            "budget.calls": calls,
        },
        env={},
        cwd=run_dir.parent,
    )
    asyncio.run(
        start_run(
            problem,
            None,
            resolved,
            evaluation=False,
            argv=["bench"],
            make_progress=quiet_progress,
            on_created=lambda _: None,
            run_dir=run_dir,
        )
    )


def best_of(repeat: int, action: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def blob_bytes(run_dir: Path) -> int:
    return sum(p.stat().st_size for p in (run_dir / "blobs").rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", default="50,200,600")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, FakeEndpoint(never_accepted) as fake:
        for budget in (int(x) for x in args.calls.split(",")):
            run_dir = Path(tmp) / f"run-{budget}"
            make_run(fake.url, run_dir, budget)
            report = load_report(run_dir)
            fold_s = best_of(args.repeat, lambda d=run_dir: read_state(d))
            md_s = best_of(args.repeat, lambda d=run_dir: render_markdown(load_report(d)))
            html_s = best_of(
                args.repeat, lambda d=run_dir: render_html(load_report(d, with_texts=True))
            )
            page = render_html(load_report(run_dir, with_texts=True)).encode()
            rows.append(
                (
                    len(report.calls),
                    (run_dir / "journal.jsonl").read_bytes().count(b"\n"),
                    blob_bytes(run_dir),
                    fold_s,
                    md_s,
                    html_s,
                    len(page),
                )
            )
    print(
        "| calls | records | blob MB | fold s | markdown s | html s | md/fold | html/fold "
        "| html MB | html/blobs |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for calls, records, blobs, fold_s, md_s, html_s, size in rows:
        print(
            f"| {calls} | {records} | {blobs / 1e6:.2f} | {fold_s:.3f} | {md_s:.3f} | "
            f"{html_s:.3f} | {md_s / fold_s:.2f} | {html_s / fold_s:.2f} | {size / 1e6:.2f} | "
            f"{size / blobs:.2f} |"
        )


if __name__ == "__main__":
    main()
