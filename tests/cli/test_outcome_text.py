"""The outcome summary names an ungraded proof instead of printing "None/7"."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.cli.run import _print_outcome
from solver.records import RunResult
from solver.run import RunOutcome


@pytest.mark.parametrize(
    ("score", "expected"), [(None, "ungraded"), (0, "grade 0/7"), (6, "grade 6/7")]
)
def test_the_summary_line_says_ungraded_when_no_grade_was_given(
    score: int | None, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    result = {
        "outcome": "unsolved",
        "reason": "no candidate accepted",
        "selected": {"lineage": "L1", "version": 0, "accepted": False},
        "score": score,
    }
    outcome = RunOutcome(Path("runs/x"), "unsolved", RunResult.model_validate(result))
    _print_outcome(outcome, as_json=False)
    out = capsys.readouterr().out
    assert expected in out and "None/7" not in out
