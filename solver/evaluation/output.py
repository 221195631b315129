"""The outputs of `solver eval`: results.json, results.md (and the same as results.html) and
the results.png chart."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solver.evaluation.page import results_page
from solver.evaluation.scores import EvalSummary, ProblemSummary, RunScore, Spread
from solver.store import write_atomic

RESULTS_FORMAT = "solver-eval-results/1"
PLOT_FIX = "pip install 'matplotlib>=3.8'"
NO_MATPLOTLIB = f"matplotlib is not installed: {PLOT_FIX}"
POLICY = {
    "rubric": "the evaluation grade (0-7; each grader's last grade, re-judged with the other "
    "graders' judgments in view when the first grades spread more than the configured limit, "
    "aggregated as the header's grading.aggregation says; on the ProofBench scale one of "
    "7/6/1/0), scaled to the problem's points",
    "strict": "the problem's full points for a complete proof (evaluation grade 7), else 0",
    "no_proof": "a run without a final proof scores 0 under both",
    "ungraded": "a final proof whose grade could not be read (graders truncated or unparsed) "
    "scores 0 under both and is labelled ungraded",
}


def _num(value: float) -> str:
    return f"{value:g}" if value == int(value) else f"{value:.2f}"


def _spread_text(s: Spread | None, of: int | None = None) -> str:
    if s is None:
        return "-"
    top = f"/{of}" if of is not None else ""
    if s.n == 1:
        return f"{_num(s.mean)}{top}"
    return f"{s.mean:.2f}{top} (min {_num(s.low)}, max {_num(s.high)}, sd {s.sd:.2f}, n={s.n})"


def results_json(summary: EvalSummary, header: dict[str, Any]) -> dict[str, Any]:
    def spread_json(s: Spread | None) -> dict[str, float | int] | None:
        return s.to_json() if s is not None else None

    return {
        "format": RESULTS_FORMAT,
        **header,
        "policy": POLICY,
        "problems": [
            {
                "id": p.problem_id,
                "points": p.points,
                "strict": spread_json(p.strict),
                "rubric": spread_json(p.rubric),
                "runs": [r.to_json() for r in p.runs],
            }
            for p in summary.problems
        ],
        "totals": {
            "max": summary.max_total,
            "per_run": [
                {"run": t.run, "complete": t.complete, "strict": t.strict, "rubric": t.rubric}
                for t in summary.totals
            ],
            "strict": spread_json(summary.strict_total),
            "rubric": spread_json(summary.rubric_total),
        },
        "grader_totals": [
            {"grader": k + 1, "rubric_total": spread_json(total)}
            for k, total in enumerate(summary.grader_totals())
        ],
        "unfinished": [
            {"problem": r.problem_id, "run": r.run, "status": r.status, "error": r.error}
            for r in summary.unfinished
        ],
        "ungraded": [{"problem": r.problem_id, "run": r.run} for r in summary.ungraded],
    }


def _cell(run: RunScore) -> str:
    if not run.finished:
        return run.status
    note = " (ungraded)" if run.ungraded else "" if run.grade is not None else " (no proof)"
    reconciled = "*" if run.reconciled else ""
    answer = f", answer {run.answer}" if run.answer else ""
    return f"{_num(run.rubric)}/{run.points}{reconciled} ({run.strict}){note}{answer}"


def _grades_text(grades: tuple[int | None, ...]) -> str:
    return ", ".join("-" if g is None else str(g) for g in grades) or "-"


def _grading_rows(summary: EvalSummary) -> list[str]:
    """One row per finished run: every grader's first and re-judged grade and the aggregate."""
    lines = [
        "| problem | run | graders | re-judged | aggregate | rubric | strict |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in summary.problems:
        for r in p.finished:
            rejudged = _grades_text(r.rejudged) if r.reconciled and r.rejudged else "-"
            if r.reconciled and not r.rejudged:
                rejudged = "(one reconciling grader)"
            how = f" ({r.aggregation})" if r.aggregation else ""
            grade = "ungraded" if r.ungraded else "-" if r.grade is None else _num(r.grade)
            lines.append(
                f"| {p.problem_id} | {r.run} | {_grades_text(r.grader_scores)} | {rejudged} | "
                f"{grade}{how} | {_num(r.rubric)}/{r.points} | {r.strict}/{r.points} |"
            )
    return lines


def _runs_text(runs: list[RunScore]) -> str:
    return ", ".join(f"{r.problem_id} run {r.run}" for r in runs)


def score_line(summary: EvalSummary, run: int, *, strict: bool) -> str:
    """One run of the whole set on one line: "P1 7/7 P2 0/7 ... total 37/42"."""
    parts = []
    for p in summary.problems:
        r = p.runs[run - 1]
        value = (str(r.strict) if strict else _num(r.rubric)) if r.finished else "?"
        label = " (ungraded)" if r.ungraded else ""  # counted as 0, but not a graded 0
        parts.append(f"{p.problem_id} {value}/{p.points}{label}")
    total = summary.totals[run - 1]
    value = str(total.strict) if strict else _num(total.rubric)
    mark = "" if total.complete else " (incomplete)"
    return f"{' '.join(parts)} total {value}/{summary.max_total}{mark}"


def results_markdown(summary: EvalSummary, header: dict[str, Any]) -> str:
    top = summary.max_total
    # On IMO-ProofBench's scale the partial-credit score is its grade, named as published.
    name = "ProofBench" if header.get("scale") == "proofbench" else "rubric"
    lines = [
        f"# Evaluation: {header['set']['path']}",
        "",
        f"{len(summary.problems)} problems, {summary.runs} run(s) each, "
        f"{header['graders']} grader(s) per final proof; model {header.get('model') or '-'}.",
        *([f"Grading: {header['grading']}.", ""] if header.get("grading") else [""]),
        f"- {name} total: {_spread_text(summary.rubric_total, top)}",
        f"- strict total: {_spread_text(summary.strict_total, top)}",
        *(
            [f"- ungraded, counted as 0: {_runs_text(summary.ungraded)}"]
            if summary.ungraded
            else []
        ),
        "",
        "## Runs",
        "",
    ]
    for n in range(1, summary.runs + 1):
        lines.append(f"- run {n} {name}: {score_line(summary, n, strict=False)}")
        lines.append(f"- run {n} strict: {score_line(summary, n, strict=True)}")
    lines += ["", "## Problems", ""]
    head = "| problem | " + " | ".join(f"run {n}" for n in range(1, summary.runs + 1))
    lines += [
        head + f" | {name} mean | strict mean |",
        "|---" * (summary.runs + 3) + "|",
    ]
    for p in summary.problems:
        cells = " | ".join(_cell(r) for r in p.runs)
        lines.append(
            f"| {p.problem_id} | {cells} | {_spread_text(p.rubric, p.points)} | "
            f"{_spread_text(p.strict, p.points)} |"
        )
    lines += [
        "",
        "Each cell: rubric score/points (strict score); * = the graders disagreed by more "
        "than the limit and re-judged (or, in older runs, a reconciliation grader decided); "
        "ungraded = the final proof's grade could not be read, counted as 0.",
        "",
        "## Grades",
        "",
        *_grading_rows(summary),
        "",
        "## Graders",
        "",
        f"The {name} total had one grader's last grade alone been counted:",
        "",
        *[
            f"- grader {k + 1}: {_spread_text(total, summary.max_total)}"
            for k, total in enumerate(summary.grader_totals())
        ],
        "",
        "## Grading policy",
        "",
        *[f"- {name}: {text}" for name, text in POLICY.items()],
        "",
    ]
    if summary.unfinished:
        lines += ["## Not finished", ""]
        for r in summary.unfinished:
            lines.append(f"- {r.problem_id} run {r.run}: {r.status} {r.error}".rstrip())
        lines += ["", "Run the same command again to continue.", ""]
    return "\n".join(lines)


def _mean(s: Spread | None) -> float:
    return s.mean if s is not None else 0.0


def _bounds(items: list[ProblemSummary], rubric: bool) -> tuple[list[float], list[float]]:
    below, above = [], []
    for p in items:
        s = p.rubric if rubric else p.strict
        below.append(s.mean - s.low if s else 0.0)
        above.append(s.high - s.mean if s else 0.0)
    return below, above


def write_chart(summary: EvalSummary, path: Path, title: str) -> str | None:
    """Mean rubric and strict score per problem, with the range over runs as error bars.
    Returns None when drawn, else why not (and writes nothing): matplotlib may be missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return NO_MATPLOTLIB
    problems = list(summary.problems)
    xs = list(range(len(problems)))
    width = 0.38
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(problems) + 2), 4.2), dpi=110)
    ax.bar(
        [x - width / 2 for x in xs],
        [_mean(p.rubric) for p in problems],
        width,
        yerr=_bounds(problems, True),
        capsize=3,
        label="rubric",
        color="#3b7dd8",
    )
    ax.bar(
        [x + width / 2 for x in xs],
        [_mean(p.strict) for p in problems],
        width,
        yerr=_bounds(problems, False),
        capsize=3,
        label="strict",
        color="#c94b4b",
    )
    ax.set_xticks(xs, [p.problem_id for p in problems], rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, max([p.points for p in problems] + [7]) + 0.5)
    ax.set_ylabel("points (mean over runs; bars: min-max)")
    rubric, strict = summary.rubric_total, summary.strict_total
    totals = (
        f"rubric {_mean(rubric):.1f}/{summary.max_total}, strict {_mean(strict):.1f}/"
        f"{summary.max_total}"
    )
    ax.set_title(f"{title}\n{totals}", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)
    return None


@dataclass(frozen=True)
class Written:
    json_path: Path
    md_path: Path
    png_path: Path | None
    chart_note: str | None  # why there is no chart, when there is none


def write_results(out_dir: Path, summary: EvalSummary, header: dict[str, Any]) -> Written:
    png_path = out_dir / "results.png"
    note = write_chart(summary, png_path, Path(str(header["set"]["path"])).name)
    if note is not None:
        png_path.unlink(missing_ok=True)  # a chart of an earlier invocation would be stale
    chart = {"chart": None if note else png_path.name, "chart_note": note}
    data = results_json(summary, {**header, **chart})
    json_path = out_dir / "results.json"
    md_path = out_dir / "results.md"
    write_atomic(json_path, json.dumps(data, indent=2, sort_keys=True).encode() + b"\n")
    markdown = results_markdown(summary, header)
    write_atomic(md_path, markdown.encode())
    page = results_page(markdown, None if note else png_path.name)
    write_atomic(out_dir / "results.html", page.encode())
    return Written(json_path, md_path, None if note else png_path, note)
