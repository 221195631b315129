"""Grades the policy reads: a grader that gave none is ungraded, never a 0; the aggregate and
the spread that asks for re-judging are taken over the same graders."""

from __future__ import annotations

import pytest

from solver.loop.grading import aggregate, evaluation_summary, final_grades
from solver.loop.policy import PolicyConfig, decide, evaluation_score, graded_score
from solver.loop.state import CallState, LineageState, RunState, VersionState
from solver.records import GradeFacts


def _grader(
    call_id: str, score: int | None, status: str = "completed", role: str = "grader"
) -> CallState:
    call = CallState(
        call_id=call_id,
        role=role,
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


def test_blind_disagreement_asks_every_grader_to_rejudge() -> None:
    state = _evaluating(
        _grader("evaluate.0", 7), _grader("evaluate.1", 0), _grader("evaluate.2", None)
    )
    step = decide(state, CFG, 0.0)
    # The grader that gave no grade has nothing to reconsider.
    assert [c.call_id for c in step.calls] == ["evaluate.0.rejudge", "evaluate.1.rejudge"]
    assert {c.role for c in step.calls} == {"grader:rejudge"}
    assert [c.target for c in step.calls] == ["evaluate.0", "evaluate.1"]


def test_rejudged_grades_replace_the_first_ones() -> None:
    rejudge = "grader:rejudge"
    state = _evaluating(
        _grader("evaluate.0", 7),
        _grader("evaluate.1", 0),
        _grader("evaluate.2", 6),
        _grader("evaluate.0.rejudge", 5, role=rejudge),
        _grader("evaluate.1.rejudge", None, role=rejudge),
        _grader("evaluate.2.rejudge", 6, role=rejudge),
    )
    assert final_grades(state) == [5, 0, 6]  # no second grade: the first one stands
    step = decide(state, CFG, 0.0)
    assert step.finish is not None and step.finish.evaluation is not None
    summary = step.finish.evaluation
    assert (summary["scores"], summary["rejudged"]) == ([7, 0, 6], [5, None, 6])
    assert (summary["aggregation"], summary["score"], summary["reconciled"]) == ("min", 0, True)


def test_agreeing_graders_finish_without_rejudging() -> None:
    state = _evaluating(
        _grader("evaluate.0", 7), _grader("evaluate.1", 6), _grader("evaluate.2", 5)
    )
    step = decide(state, CFG, 0.0)
    assert step.finish is not None and not step.calls
    assert step.finish.evaluation is not None
    assert step.finish.evaluation["reconciled"] is False
    assert step.finish.evaluation["score"] == 5


@pytest.mark.parametrize(("how", "expected"), [("min", 2), ("median", 5), ("mean", 4.67)])
def test_aggregations(how: str, expected: float) -> None:
    state = _evaluating(
        _grader("evaluate.0", 7), _grader("evaluate.1", 2), _grader("evaluate.2", 5)
    )
    assert evaluation_score(state, how) == expected  # type: ignore[arg-type]
    rules = PolicyConfig(evaluation_graders=3, aggregation=how).evaluation_rules  # type: ignore[arg-type]
    assert evaluation_summary(state, rules)["score"] == expected


def test_aggregate_leaves_out_missing_grades_and_takes_the_lower_median() -> None:
    assert aggregate([None, 3, 6], "median") == 3
    assert aggregate([None, None], "min") is None
    assert aggregate([6, 7], "mean") == 6.5


def test_reconciliation_off_never_rejudges() -> None:
    state = _evaluating(_grader("evaluate.0", 7), _grader("evaluate.1", 0))
    off = PolicyConfig(evaluation=True, evaluation_graders=2, reconcile="off")
    step = decide(state, off, 0.0)
    assert step.finish is not None and not step.calls


def test_a_run_with_a_chief_reconciliation_keeps_its_grade() -> None:
    state = _evaluating(
        _grader("evaluate.0", 7),
        _grader("evaluate.1", 0),
        _grader("evaluate.2", 0),
        _grader("evaluate.reconcile", 4, role="grader:reconcile"),
    )
    assert evaluation_score(state) == 4
    step = decide(state, CFG, 0.0)
    assert step.finish is not None and not step.calls


def test_scheme_is_drafted_before_the_graders() -> None:
    cfg = PolicyConfig(evaluation=True, evaluation_graders=2, draft_scheme=True)
    state = _evaluating()
    first = decide(state, cfg, 0.0)
    assert [(c.call_id, c.role) for c in first.calls] == [("evaluate.scheme", "rubric_writer")]
    state.calls["evaluate.scheme"] = _grader("evaluate.scheme", None, role="rubric_writer")
    second = decide(state, cfg, 0.0)
    assert [c.call_id for c in second.calls] == ["evaluate.0", "evaluate.1"]
    assert {c.variant for c in second.calls} == {"rubric"}


def test_proofbench_scale_picks_its_variants() -> None:
    cfg = PolicyConfig(evaluation=True, evaluation_graders=2, grading_scale="proofbench")
    step = decide(_evaluating(), cfg, 0.0)
    assert {(c.role, c.variant) for c in step.calls} == {("grader:evaluation", "proofbench")}


def test_truncated_or_unparsed_grader_has_no_grade() -> None:
    truncated = _grader("grade.L0.v0", 0)
    truncated.truncated = True
    unparsed = _grader("grade.L1.v0", 0)
    unparsed.parsed_ok = False
    assert graded_score(truncated) is None
    assert graded_score(unparsed) is None
    assert graded_score(_grader("grade.L2.v0", 0)) == 0
