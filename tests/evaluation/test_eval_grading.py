"""The eval table from scripted grades: minimum, median and re-judging each give the table
they should, per problem and in total, with every grader's grade shown."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from solver.cli.eval import eval_group
from solver.testing import FakeEndpoint, RecordedRequest
from solver.testing.fake_endpoint import Reply
from tests.evaluation.test_eval import eval_args, write_set
from tests.loop.harness import audit_ok
from tests.loop.scripts import json_reply, role_of
from tests.report.responders import olympiad


def scripted_grades(grades: dict[str, str]) -> Callable[[RecordedRequest], Reply]:
    """``olympiad``, except that the evaluation graders of the problem whose statement holds
    a key of ``grades`` answer its digits in turn (one call at a time: --concurrency 1)."""
    turns: dict[str, int] = {}
    lock = threading.Lock()

    def answer(request: RecordedRequest) -> Reply:
        if role_of(request) == "evaluation":
            key = next(k for k in grades if k in request.user_text)
            with lock:
                turn = turns.get(key, 0)
                turns[key] = turn + 1
            score = int(grades[key][turn % len(grades[key])])
            return json_reply("Assessment.", {"score": score, "justification": f"view {turn}"})
        return olympiad(request)

    return answer


SET = [
    {"id": "P1", "statement": "ONE: prove the first claim.", "reference_solution": "Ref one."},
    {
        "id": "P2",
        "statement": "TWO: prove the second claim.",
        "reference_solution": "Ref two.",
        "grading_guidelines": "(Partial) 2 points for the reduction.",
    },
]
ONE_AT_A_TIME = ["--concurrency", "1", "--concurrency-problems", "1"]


def _evaluate(tmp_path: Path, grades: dict[str, str], *flags: str) -> tuple[dict, str]:  # type: ignore[type-arg]
    set_path = write_set(tmp_path / "set.jsonl", SET)
    out = tmp_path / "eval"
    with FakeEndpoint(scripted_grades(grades)) as fake:
        args = eval_args(set_path, out, fake.url, *ONE_AT_A_TIME, *flags)
        result = CliRunner().invoke(eval_group, args)
    assert result.exit_code == 0, result.output
    for problem in ("P1", "P2"):
        audit_ok(out / problem / "run-1")
    return json.loads((out / "results.json").read_text()), (out / "results.md").read_text()


def test_minimum_is_the_default(tmp_path: Path) -> None:
    data, markdown = _evaluate(tmp_path, {"ONE": "776", "TWO": "323"})
    runs = [p["runs"][0] for p in data["problems"]]
    assert [r["grader_scores"] for r in runs] == [[7, 7, 6], [3, 2, 3]]
    assert [(r["grade"], r["aggregation"], r["reconciled"]) for r in runs] == [
        (6, "min", False),
        (2, "min", False),
    ]
    assert "| P1 | 1 | 7, 7, 6 | - | 6 (min) | 6/7 | 0/7 |" in markdown
    assert "| P2 | 1 | 3, 2, 3 | - | 2 (min) | 2/7 | 0/7 |" in markdown
    assert "Grading: min of the graders' last grades" in markdown
    assert data["totals"]["rubric"]["mean"] == 8
    # Each grader's own total: grader 1 gave 7 + 3, grader 2 7 + 2, grader 3 6 + 3.
    assert [g["rubric_total"]["mean"] for g in data["grader_totals"]] == [10, 9, 9]
    assert "- grader 1: 10/14" in markdown


def test_median(tmp_path: Path) -> None:
    data, markdown = _evaluate(tmp_path, {"ONE": "776", "TWO": "323"}, "--aggregation", "median")
    assert [p["runs"][0]["grade"] for p in data["problems"]] == [7, 3]
    assert "| P1 | 1 | 7, 7, 6 | - | 7 (median) | 7/7 | 7/7 |" in markdown
    assert data["totals"]["strict"]["mean"] == 7


def test_rejudging_replaces_the_first_grades(tmp_path: Path) -> None:
    # P1's graders spread 7: each re-judges (the scripted re-judge answers 5).
    data, markdown = _evaluate(tmp_path, {"ONE": "730", "TWO": "777"})
    one, two = (p["runs"][0] for p in data["problems"])
    assert one["grader_scores"] == [7, 3, 0] and one["rejudged"] == [5, 5, 5]
    assert (one["grade"], one["reconciled"]) == (5, True)
    assert (two["grade"], two["reconciled"], two["rejudged"]) == (7, False, [None, None, None])
    assert "| P1 | 1 | 7, 3, 0 | 5, 5, 5 | 5 (min) | 5/7 | 0/7 |" in markdown
    assert "5/7* (0)" in markdown
    page = (tmp_path / "eval" / "results.html").read_text()
    assert (
        "<tr><td>P1</td><td>1</td><td>7, 3, 0</td><td>5, 5, 5</td><td>5 (min)</td>"
        "<td>5/7</td><td>0/7</td></tr>"
    ) in page
    assert "<h2>Graders</h2>" in page and "<li>grader 1: " in page


def test_proofbench_scale_lowers_grades_to_its_four(tmp_path: Path) -> None:
    data, markdown = _evaluate(tmp_path, {"ONE": "555", "TWO": "776"}, "--scale", "proofbench")
    one, two = (p["runs"][0] for p in data["problems"])
    assert one["grader_scores"] == [1, 1, 1]  # 5 is not a ProofBench grade: 1
    assert two["grader_scores"] == [7, 7, 6] and two["grade"] == 6
    assert "ProofBench 7/6/1/0" in markdown
    assert "- ProofBench total: 7/14" in markdown and "rubric total" not in markdown
