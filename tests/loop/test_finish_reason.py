"""An ungraded proof that was not accepted is reported as such: its reason says no grader gave
a grade, so nobody reads "unsolved" as a zero that a grader gave."""

from __future__ import annotations

from pathlib import Path

from solver.loop.policy import _finish
from solver.loop.state import CallState, LineageState, RunState, VersionState, grade_call_id
from solver.records import GradeFacts
from solver.testing import FakeEndpoint
from tests.loop.harness import audit_ok, result_of, solve
from tests.loop.test_budgets import _generators_stall


def _state(grade: int | None) -> RunState:
    state = RunState()
    version = VersionState(lineage="L0", version=0, producer="L0.v0.generate", parent=None)
    version.status = "failed"
    state.lineages["L0"] = LineageState(lineage="L0", index=0, versions={0: version})
    if grade is not None:
        call_id = grade_call_id(version)
        state.calls[call_id] = CallState(
            call_id=call_id,
            role="grader",
            variant="standard",
            phase="grade",
            lineage="L0",
            version=0,
            target=None,
            evaluation=False,
            status="completed",
            parsed_ok=True,
            facts=GradeFacts(score=grade),
        )
    return state


def test_an_ungraded_selection_says_no_grader_gave_a_grade() -> None:
    finish = _finish(_state(None), ("L0", 0), "the selector's choice")
    assert finish.outcome == "unsolved"
    assert finish.reason == "the selector's choice; no grader gave a grade"


def test_a_selection_graded_zero_is_plain_unsolved() -> None:
    finish = _finish(_state(0), ("L0", 0), "the selector's choice")
    assert (finish.outcome, finish.reason) == ("unsolved", "the selector's choice")


def test_a_run_stopped_before_any_proof_says_so(tmp_path: Path) -> None:
    """The lineage whose only version was cancelled reads "cancelled", not "open", and the
    run still writes a final/proof.md, one saying no proof was produced."""
    with FakeEndpoint(_generators_stall) as fake:
        outcome = solve(fake, tmp_path, candidates=1, budget__wall_clock_s=1.0)
    result = result_of(outcome.run_dir)
    assert result["selected"] is None
    assert result["lineages"] == {"L0": "cancelled"}
    note = (outcome.run_dir / "final" / "proof.md").read_text()
    assert note.startswith("# No proof") and result["reason"] in note
    audit_ok(outcome.run_dir)
