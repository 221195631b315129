"""A final proof whose grade could not be read ("ungraded"): 0 in every total, labelled
wherever eval, calibrate and report show it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from solver.evaluation import (
    GradedProof,
    Job,
    JobResult,
    calibration_markdown,
    calibration_report,
    results_json,
    results_markdown,
    score_from_result,
    score_line,
    summarise,
)
from solver.problems import Problem
from solver.records import GradeFacts, RunResult
from solver.report import load_report, render_html, render_markdown
from solver.report.load import _evaluation

RESULT = {
    "outcome": "partial",
    "selected": {"lineage": "L0", "version": 1},
    "evaluation_score": None,
    "evaluation": {"scores": [None, None, 4], "reconciled": False},
}


def test_an_ungraded_proof_counts_zero_and_is_labelled_in_the_results() -> None:
    ungraded = score_from_result("P1", 1, "d", 7, RESULT)
    graded = score_from_result("P2", 1, "d", 7, {**RESULT, "evaluation_score": 7})
    no_proof = score_from_result("P3", 1, "d", 7, {**RESULT, "selected": None})
    assert ungraded.ungraded and ungraded.rubric == 0 and ungraded.strict == 0
    assert not graded.ungraded and not no_proof.ungraded
    assert ungraded.grader_scores == (None, None, 4)
    summary = summarise([("P1", 7), ("P2", 7), ("P3", 7)], [ungraded, graded, no_proof], 1)
    assert summary.totals[0].rubric == 7 and summary.totals[0].complete
    assert score_line(summary, 1, strict=False) == "P1 0/7 (ungraded) P2 7/7 P3 0/7 total 7/21"
    header = {"set": {"path": "s.jsonl"}, "graders": 3, "model": "m"}
    data = results_json(summary, header)
    assert data["ungraded"] == [{"problem": "P1", "run": 1}]
    assert data["problems"][0]["runs"][0]["ungraded"] is True
    markdown = results_markdown(summary, header)
    assert "- ungraded, counted as 0: P1 run 1" in markdown
    assert "| P1 | 0/7 (0) (ungraded) |" in markdown
    assert "| P3 | 0/7 (0) (no proof) |" in markdown


def test_calibration_labels_an_ungraded_item_and_leaves_it_out(tmp_path: Path) -> None:
    problem = Problem(id="a", statement="Show X.")
    items = [GradedProof("a", problem, "proof", 7.0), GradedProof("b", problem, "proof", 3.0)]
    results = [
        JobResult(Job("a", 1, tmp_path / "a", problem), "finished", RESULT),
        JobResult(
            Job("b", 1, tmp_path / "b", problem), "finished", {**RESULT, "evaluation_score": 3}
        ),
    ]
    agreed, rows = calibration_report(items, results)
    assert agreed is not None and agreed.n == 1  # only the graded item is compared
    assert [row["ungraded"] for row in rows] == [True, False]
    markdown = calibration_markdown("f.jsonl", 3, agreed, rows)
    assert "Ungraded (no grade could be read; not compared): a." in markdown
    assert "| a | 7 | ungraded |" in markdown


def test_the_report_labels_ungraded_graders_and_an_ungraded_final_grade(
    finished_run: Path,
) -> None:
    loaded = load_report(finished_run)
    graders = [c for c in loaded.calls if c.role == "grader:evaluation"]
    calls = [
        replace(c, facts=GradeFacts(score=None)) if c is graders[0] else c for c in loaded.calls
    ]
    assert calls[loaded.calls.index(graders[0])].summary == "ungraded"
    evaluation = _evaluation(calls, RunResult.model_validate(RESULT))
    assert evaluation is not None
    assert evaluation["labels"] == ["ungraded", "7", "7"] and evaluation["ungraded"]
    shown = replace(loaded, calls=tuple(calls), evaluation=evaluation)
    assert (
        "| evaluation grade | ungraded (counted as 0) (graders: ungraded, 7, 7) |"
        in render_markdown(shown)
    )
    page = render_html(shown)
    assert "ungraded (counted as 0) (graders: ungraded, 7, 7)" in page
    assert "score None" not in page and "(pending)" not in page
