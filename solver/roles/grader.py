"""Grader: a score from 0 to 7 with a justification.

Three policy keys share this module and its output contract:

- ``grader``: in-loop and blind grading; sees the problem and the proof text only.
- ``grader:evaluation``: evaluation mode, after the solve phase has ended; also sees the
  reference solution and/or the grading guidelines.
- ``grader:reconcile``: evaluation mode (blind or not); sees the judgments of several graders
  and, when the problem has them, the reference solution and/or guidelines; decides the score.

Output contract: ``{"score": <integer 0-7>, "justification": "..."}``. Output without a usable
score parses to 0 with ``parsed`` false; the loop records such a call as ungraded (no score),
never as a grade of 0. A fractional score is rounded down.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Self

from pydantic import Field, model_validator

from solver.roles.base import Kind, RoleInputs, RoleOutput
from solver.roles.facts import GradeFacts
from solver.roles.jsonblock import find_object, lower_keys
from solver.roles.proof import strip_thinking

NAME = "grader"
EVALUATION = "grader:evaluation"
RECONCILE = "grader:reconcile"
VARIANTS: tuple[str, ...] = ("standard",)
EVALUATION_VARIANTS: tuple[str, ...] = ("rubric",)
RECONCILE_VARIANTS: tuple[str, ...] = ("reconcile",)
TEMPLATES: dict[str, tuple[str, str]] = {
    "standard": ("grader/standard.system.j2", "grader/standard.user.j2")
}
EVALUATION_TEMPLATES: dict[str, tuple[str, str]] = {
    "rubric": ("grader/rubric.system.j2", "grader/rubric.user.j2")
}
RECONCILE_TEMPLATES: dict[str, tuple[str, str]] = {
    "reconcile": ("grader/reconcile.system.j2", "grader/reconcile.user.j2")
}
MAX_SCORE = 7


class Inputs(RoleInputs):
    problem_statement: Annotated[str, Kind("problem_statement"), Field(min_length=1)]
    proof_text: Annotated[str, Kind("proof_text"), Field(min_length=1)]


class EvaluationInputs(RoleInputs):
    """At least one of the reference solution and the grading guidelines is present."""

    problem_statement: Annotated[str, Kind("problem_statement"), Field(min_length=1)]
    proof_text: Annotated[str, Kind("proof_text"), Field(min_length=1)]
    reference_solution: Annotated[str | None, Kind("reference_solution")] = None
    grading_guidelines: Annotated[str | None, Kind("grading_guidelines")] = None

    @model_validator(mode="after")
    def _has_material(self) -> Self:
        if (
            not (self.reference_solution or "").strip()
            and not (self.grading_guidelines or "").strip()
        ):
            raise ValueError("evaluation grading needs a reference solution or guidelines")
        return self


class ReconcileInputs(RoleInputs):
    """The reference solution and the guidelines only when the problem has them: graders
    that disagree are reconciled in blind evaluation too."""

    problem_statement: Annotated[str, Kind("problem_statement"), Field(min_length=1)]
    proof_text: Annotated[str, Kind("proof_text"), Field(min_length=1)]
    reference_solution: Annotated[str | None, Kind("reference_solution")] = None
    grading_guidelines: Annotated[str | None, Kind("grading_guidelines")] = None
    grader_judgments: Annotated[
        tuple[str, ...], Kind("grader_judgments"), Field(min_length=2, strict=False)
    ]


class Output(RoleOutput):
    score: int = Field(ge=0, le=MAX_SCORE)
    justification: str

    def facts(self) -> GradeFacts:
        # No readable grade is None, never the conservative 0 that would pass for a grade.
        return GradeFacts(score=self.score if self.parsed else None)


CONSERVATIVE = Output(parsed=False, parse_note="no score", score=0, justification="")


def _score(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    else:
        match = re.fullmatch(r"\s*(\d{1,3}(?:\.\d+)?)\s*(?:/\s*7)?\s*(?:points?)?\s*", str(value))
        if match is None:
            return None
        number = float(match.group(1))
    if not math.isfinite(number) or number < 0 or number > MAX_SCORE:
        return None
    return math.floor(number)


def _accept(value: dict[str, Any]) -> bool:
    keys = lower_keys(value)
    return "score" in keys or "points" in keys or "grade" in keys


_PROSE_SCORES = (
    re.compile(r"<points>\s*(\d{1,3}(?:\.\d+)?)\s*</points>", re.IGNORECASE),
    re.compile(r"\\boxed\{\s*(\d{1,3}(?:\.\d+)?)\s*\}"),
    re.compile(
        r"\b(?:final\s+)?(?:score|grade|points)\b\W{0,6}(\d{1,3}(?:\.\d+)?)(?:\s*/\s*7)?",
        re.IGNORECASE,
    ),
)


def parse(text: str) -> Output:
    """Never raises; see the module docstring for the contract."""
    visible = strip_thinking(text)
    found = find_object(visible, _accept)
    if found is not None:
        data = lower_keys(found)
        score = _score(data.get("score", data.get("points", data.get("grade"))))
        justification = str(data.get("justification", data.get("reason", ""))).strip()
        if score is None:
            return CONSERVATIVE.model_copy(update={"parse_note": "score missing or not 0-7"})
        return Output(parsed=True, score=score, justification=justification)
    # Prose is read conservatively: every score it states counts, and when they disagree
    # ("Final score: 3/7 ... worth 7 points") the lowest is taken, never the last one.
    stated = [match for pattern in _PROSE_SCORES for match in pattern.findall(visible)]
    if stated:
        scores = [_score(match) for match in stated]
        if any(score is None for score in scores):
            return CONSERVATIVE.model_copy(update={"parse_note": "score not 0-7"})
        valid = [score for score in scores if score is not None]
        note = "score read from prose (no JSON block)"
        if len(set(valid)) > 1:
            note += f"; prose states {sorted(set(valid))}, the lowest is taken"
        return Output(
            parsed=True, parse_note=note, score=min(valid), justification=visible.strip()[-2000:]
        )
    return CONSERVATIVE


def format_judgment(output: Output) -> str:
    """One grader's judgment as the reconciliation grader is shown it."""
    return f"Score: {output.score}/7\n\nJustification:\n{output.justification or '(none)'}"
