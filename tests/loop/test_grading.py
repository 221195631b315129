"""Grades the policy reads: a grader that gave none is ungraded, never a 0, and the median and
the reconciliation spread are taken over the same graders."""

from __future__ import annotations

from solver.loop.policy import PolicyConfig, decide, evaluation_score, graded_score
from solver.loop.state import CallState, LineageState, RunState, VersionState
from solver.records import GradeFacts


def _grader(call_id: str, score: int | None, status: str = "completed") -> CallState:
    call = CallState(
        call_id=call_id,
        role="grader",
        variant="standard",
        phase="evaluate",
        lineage="L0",
        version=0,
        target=None,
        evaluation=True,
        status=status,
    )
    if status == "completed":
        call.parsed_ok = score is not None
        call.facts = GradeFacts(score=score)
    return call


def _evaluating(*graders: CallState) -> RunState:
    state = RunState(phase="evaluate", selected=("L0", 0))
    lineage = LineageState(lineage="L0", index=0)
    lineage.versions[0] = VersionState(
        lineage="L0", version=0, producer="L0.v0.generate", parent=None
    )
    state.lineages["L0"] = lineage
    for call in graders:
        state.calls[call.call_id] = call
    return state


CFG = PolicyConfig(evaluation=True, evaluation_graders=3, evaluation_material=False)


def test_failed_graders_are_left_out_of_the_median() -> None:
    state = _evaluating(
        _grader("evaluate.0", 7), _grader("evaluate.1", None, "failed"), _grader("evaluate.2", None)
    )
    assert evaluation_score(state) == 7
    # One grade has no spread: nothing to reconcile.
    step = decide(state, CFG, 0.0)
    assert step.finish is not None and not step.calls


def test_no_grade_at_all_is_ungraded() -> None:
    state = _evaluating(
        _grader("evaluate.0", None, "failed"),
        _grader("evaluate.1", None),
        _grader("evaluate.2", None),
    )
    assert evaluation_score(state) is None


def test_blind_disagreement_asks_for_reconciliation() -> None:
    state = _evaluating(
        _grader("evaluate.0", 7), _grader("evaluate.1", 0), _grader("evaluate.2", 7)
    )
    step = decide(state, CFG, 0.0)
    assert [c.call_id for c in step.calls] == ["evaluate.reconcile"]
    assert step.calls[0].role == "grader:reconcile"


def test_truncated_or_unparsed_grader_has_no_grade() -> None:
    truncated = _grader("grade.L0.v0", 0)
    truncated.truncated = True
    unparsed = _grader("grade.L1.v0", 0)
    unparsed.parsed_ok = False
    assert graded_score(truncated) is None
    assert graded_score(unparsed) is None
    assert graded_score(_grader("grade.L2.v0", 0)) == 0
