"""The evaluation phase of the policy: marking scheme, graders, re-judging, the aggregate grade.

After the solve phase has ended and a proof is selected (pure functions, like the policy):

1. ``evaluate.scheme``: when the problem has a reference solution but no grading guidelines and
   drafting is on, the rubric writer drafts a marking scheme every grader is then shown.
2. ``evaluate.<n>`` (n = 0..G-1): G independent graders.
3. ``evaluate.<n>.rejudge``: when their grades spread more than ``reconcile_spread``, every
   grader that gave a grade grades again with its own judgment and the others' in view
   (MathArena's judges re-judge this way); its second grade replaces its first.
4. The evaluation grade aggregates each grader's last grade: the minimum (the default, as
   MathArena reports), the lower median, or the mean.

A run made before re-judging carries one ``evaluate.reconcile`` call (a single chief grader);
its grade, when it gave one, is still that run's evaluation grade.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from solver.loop.state import CallState, RunState
from solver.records import CallPlanned, GradeFacts

Aggregation = Literal["min", "median", "mean"]
Reconcile = Literal["rejudge", "off"]
Scale = Literal["points", "proofbench"]
AGGREGATIONS: tuple[Aggregation, ...] = ("min", "median", "mean")
SCHEME_CALL = "evaluate.scheme"
LEGACY_RECONCILE = "evaluate.reconcile"
REJUDGE_SUFFIX = ".rejudge"
_NOT_A_GRADER = ("grader:reconcile", "grader:rejudge", "rubric_writer")


@dataclass(frozen=True)
class EvaluationRules:
    graders: int = 1
    material: bool = True  # a reference solution or guidelines exist
    draft_scheme: bool = False  # a reference solution and no guidelines: draft a scheme
    reconcile_spread: int = 2
    reconcile: Reconcile = "rejudge"
    aggregation: Aggregation = "min"
    scale: Scale = "points"


def graded_score(call: CallState | None) -> int | None:
    """A grader call's grade, or None when it gave none: it failed, was cut off, or its
    output held no readable grade. Never a made-up 0."""
    if call is None or call.status != "completed" or call.truncated or not call.parsed_ok:
        return None
    return call.facts.score if isinstance(call.facts, GradeFacts) else None


def _ordinal(call: CallState) -> int:
    tail = call.call_id.removeprefix("evaluate.")
    return int(tail) if tail.isdigit() else 1 << 30


def evaluation_calls(state: RunState) -> list[CallState]:
    """The independent evaluation graders, in their order (evaluate.0, evaluate.1, ...)."""
    return sorted(
        (c for c in state.calls.values() if c.phase == "evaluate" and c.role not in _NOT_A_GRADER),
        key=lambda c: (_ordinal(c), c.call_id),
    )


def rejudge_call_id(grader_call: str) -> str:
    return grader_call + REJUDGE_SUFFIX


def first_grades(state: RunState) -> list[int | None]:
    return [graded_score(c) for c in evaluation_calls(state)]


def second_grades(state: RunState) -> list[int | None]:
    """Each grader's re-judged grade, None where it did not re-judge or gave no grade."""
    return [
        graded_score(state.calls.get(rejudge_call_id(c.call_id))) for c in evaluation_calls(state)
    ]


def final_grades(state: RunState) -> list[int | None]:
    """Each grader's last grade: its re-judged one when it gave one, else its first."""
    return [
        second if second is not None else first
        for first, second in zip(first_grades(state), second_grades(state), strict=True)
    ]


def aggregate(scores: Sequence[float | None], how: Aggregation) -> float | None:
    """The aggregate of the grades given (None ones left out); None when none was given.
    The median of an even count is the lower one, so that it is a grade someone gave."""
    given = sorted(s for s in scores if s is not None)
    if not given:
        return None
    if how == "min":
        return given[0]
    if how == "median":
        return given[(len(given) - 1) // 2]
    return round(sum(given) / len(given), 2)


def evaluation_score(state: RunState, how: Aggregation = "min") -> float | None:
    legacy = graded_score(state.calls.get(LEGACY_RECONCILE))
    if legacy is not None:
        return legacy
    score = aggregate(final_grades(state), how)
    return int(score) if score is not None and float(score).is_integer() else score


def _spread(scores: Sequence[int | None]) -> int:
    given = [s for s in scores if s is not None]
    return max(given) - min(given) if len(given) >= 2 else 0


def evaluation_summary(state: RunState, rules: EvaluationRules) -> dict[str, Any]:
    """What final/result.json says about the evaluation grading."""
    calls = evaluation_calls(state)
    rejudged = [rejudge_call_id(c.call_id) in state.calls for c in calls]
    scheme = state.calls.get(SCHEME_CALL)
    return {
        # None: that grader gave no grade (failed, cut off or unreadable).
        "scores": first_grades(state),
        "rejudged": second_grades(state),
        "final": final_grades(state),
        "aggregation": rules.aggregation,
        "scale": rules.scale,
        "spread": _spread(first_grades(state)),
        "reconciled": any(rejudged) or graded_score(state.calls.get(LEGACY_RECONCILE)) is not None,
        "marking_scheme": (
            None
            if scheme is None
            else "drafted"
            if scheme.status == "completed" and scheme.parsed_ok
            else "failed"
        ),
        "score": evaluation_score(state, rules.aggregation),
    }


def _grader_role(rules: EvaluationRules) -> str:
    return "grader:evaluation" if rules.material else "grader"


def _variant(role: str, rules: EvaluationRules) -> str:
    if rules.scale == "proofbench":
        return "proofbench"
    return {"grader": "standard", "grader:evaluation": "rubric", "grader:rejudge": "rejudge"}[role]


def _planned(call_id: str, role: str, variant: str, state: RunState, **extra: Any) -> CallPlanned:
    assert state.selected is not None
    lineage, version = state.selected
    return CallPlanned(
        call_id=call_id,
        role=role,
        variant=variant,
        phase="evaluate",
        lineage=lineage,
        version=version,
        evaluation=True,
        **extra,
    )


def evaluation_step(state: RunState, rules: EvaluationRules) -> tuple[CallPlanned, ...] | None:
    """The calls to make next: a non-empty tuple; an empty one while calls are in flight;
    None when the evaluation grading is complete."""
    if rules.draft_scheme and rules.material:
        scheme = state.calls.get(SCHEME_CALL)
        if scheme is None:
            return (_planned(SCHEME_CALL, "rubric_writer", "standard", state),)
        if scheme.status == "planned":
            return ()
    role = _grader_role(rules)
    missing = tuple(
        _planned(f"evaluate.{n}", role, _variant(role, rules), state)
        for n in range(rules.graders)
        if f"evaluate.{n}" not in state.calls
    )
    if missing:
        return missing
    calls = evaluation_calls(state)
    if any(c.status == "planned" for c in calls):
        return ()
    if LEGACY_RECONCILE in state.calls:  # a run from before re-judging, resumed
        return () if state.calls[LEGACY_RECONCILE].status == "planned" else None
    if rules.reconcile == "off" or _spread(first_grades(state)) <= rules.reconcile_spread:
        return None
    # Only a grader that gave a grade can reconsider it; every one does, not only outliers.
    graded = [c for c in calls if graded_score(c) is not None]
    rejudges = tuple(
        _planned(
            rejudge_call_id(c.call_id),
            "grader:rejudge",
            _variant("grader:rejudge", rules),
            state,
            target=c.call_id,
        )
        for c in graded
        if rejudge_call_id(c.call_id) not in state.calls
    )
    if rejudges:
        return rejudges
    if any(state.calls[rejudge_call_id(c.call_id)].status == "planned" for c in graded):
        return ()
    return None
