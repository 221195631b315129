"""Grader: a score from 0 to 7 with a justification.

Four policy keys share this module and its output contract:

- ``grader``: in-loop and blind grading; sees the problem and the proof text only.
- ``grader:evaluation``: evaluation mode, after the solve phase has ended; also sees the
  reference solution, the grading guidelines and/or a drafted marking scheme.
- ``grader:rejudge``: evaluation mode, when the graders disagree: one grader grades again
  with its own first judgment and the other graders' judgments in view (MathArena's
  re-judging; each grader's second grade is a call of its own).
- ``grader:reconcile``: the single "chief" of runs made before re-judging; kept so that those
  runs still audit and report.

Output contract: ``{"score": <integer 0-7>, "justification": "..."}``; with a marking scheme
or guidelines (the ``rubric`` variant) also ``"checkpoints": [{"item", "max", "awarded"}]``,
one entry per checkpoint. Output without a usable score parses to 0 with ``parsed`` false; the
loop records such a call as ungraded (no score), never as a grade of 0. A fractional score is
rounded down; a score above its checkpoints' sum is lowered to that sum. The ``proofbench``
variants grade on IMO-ProofBench's 7/6/1/0 scale: :func:`on_scale` lowers any other score to
the next grade of that scale.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from solver.roles.base import Kind, RoleInputs, RoleOutput
from solver.roles.facts import GradeFacts
from solver.roles.jsonblock import find_object, lower_keys
from solver.roles.proof import strip_thinking

NAME = "grader"
EVALUATION = "grader:evaluation"
REJUDGE = "grader:rejudge"
RECONCILE = "grader:reconcile"
# The first variant of each key is the default; "proofbench" is chosen by grading.scale.
VARIANTS: tuple[str, ...] = ("standard", "proofbench")
EVALUATION_VARIANTS: tuple[str, ...] = ("rubric", "proofbench")
REJUDGE_VARIANTS: tuple[str, ...] = ("rejudge", "proofbench")
RECONCILE_VARIANTS: tuple[str, ...] = ("reconcile",)
TEMPLATES: dict[str, tuple[str, str]] = {
    "standard": ("grader/standard.system.j2", "grader/standard.user.j2"),
    "proofbench": ("grader/proofbench.system.j2", "grader/standard.user.j2"),
}
EVALUATION_TEMPLATES: dict[str, tuple[str, str]] = {
    "rubric": ("grader/rubric.system.j2", "grader/rubric.user.j2"),
    "proofbench": ("grader/rubric-proofbench.system.j2", "grader/rubric.user.j2"),
}
REJUDGE_TEMPLATES: dict[str, tuple[str, str]] = {
    "rejudge": ("grader/rejudge.system.j2", "grader/rejudge.user.j2"),
    "proofbench": ("grader/rejudge-proofbench.system.j2", "grader/rejudge.user.j2"),
}
RECONCILE_TEMPLATES: dict[str, tuple[str, str]] = {
    "reconcile": ("grader/reconcile.system.j2", "grader/reconcile.user.j2")
}
MAX_SCORE = 7
PROOFBENCH_SCALE: tuple[int, ...] = (0, 1, 6, 7)
MAX_CHECKPOINTS = 50


class Inputs(RoleInputs):
    problem_statement: Annotated[str, Kind("problem_statement"), Field(min_length=1)]
    proof_text: Annotated[str, Kind("proof_text"), Field(min_length=1)]


def _has_any(*texts: str | None) -> bool:
    return any((text or "").strip() for text in texts)


class EvaluationInputs(RoleInputs):
    """At least one of the reference solution, the grading guidelines and a marking scheme
    (drafted by the rubric writer from the reference solution) is present."""

    problem_statement: Annotated[str, Kind("problem_statement"), Field(min_length=1)]
    proof_text: Annotated[str, Kind("proof_text"), Field(min_length=1)]
    reference_solution: Annotated[str | None, Kind("reference_solution")] = None
    grading_guidelines: Annotated[str | None, Kind("grading_guidelines")] = None
    marking_scheme: Annotated[str | None, Kind("marking_scheme")] = None

    @model_validator(mode="after")
    def _has_material(self) -> Self:
        if not _has_any(self.reference_solution, self.grading_guidelines, self.marking_scheme):
            raise ValueError("evaluation grading needs a reference solution or guidelines")
        return self


class RejudgeInputs(RoleInputs):
    """A grader's second look: its own first judgment and every other grader's, plus the
    material the first graders had (none in blind evaluation)."""

    problem_statement: Annotated[str, Kind("problem_statement"), Field(min_length=1)]
    proof_text: Annotated[str, Kind("proof_text"), Field(min_length=1)]
    reference_solution: Annotated[str | None, Kind("reference_solution")] = None
    grading_guidelines: Annotated[str | None, Kind("grading_guidelines")] = None
    marking_scheme: Annotated[str | None, Kind("marking_scheme")] = None
    own_judgment: Annotated[str, Kind("grader_judgments"), Field(min_length=1)]
    other_judgments: Annotated[
        tuple[str, ...], Kind("grader_judgments"), Field(min_length=1, strict=False)
    ]


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


class Checkpoint(BaseModel):
    """One item of a marking scheme as a rubric grader accounted for it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    item: str
    max: int = Field(ge=0, le=MAX_SCORE)
    awarded: int = Field(ge=0, le=MAX_SCORE)


class Output(RoleOutput):
    score: int = Field(ge=0, le=MAX_SCORE)
    justification: str
    checkpoints: tuple[Checkpoint, ...] = ()

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


def _checkpoints(value: object) -> tuple[Checkpoint, ...] | None:
    """The checkpoints a grader listed, or None when the list is malformed."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_CHECKPOINTS:
        return None
    found: list[Checkpoint] = []
    for entry in value:
        if not isinstance(entry, dict):
            return None
        data = lower_keys(entry)
        awarded = _score(data.get("awarded", data.get("points")))
        most = _score(data.get("max", data.get("max_points", awarded)))
        if awarded is None or most is None or awarded > most:
            return None
        item = str(data.get("item", data.get("checkpoint", ""))).strip()
        found.append(Checkpoint(item=item[:500], max=most, awarded=awarded))
    return tuple(found)


def on_scale(score: int, scale: tuple[int, ...] = PROOFBENCH_SCALE) -> int:
    """``score`` lowered to the nearest grade of ``scale`` at or below it (a 5 on the 7/6/1/0
    scale is a 1: between its grades the lower one holds, as the parser reads prose)."""
    return max(grade for grade in scale if grade <= score)


def _accept(value: dict[str, Any]) -> bool:
    keys = lower_keys(value)
    return "score" in keys or "points" in keys or "grade" in keys


_PROSE_SCORES = (
    # "<points>6 out of 7</points>" is IMO-ProofBench's autograder format.
    re.compile(r"<points>\s*(\d{1,3}(?:\.\d+)?)\s*(?:out\s+of\s+7\s*)?</points>", re.IGNORECASE),
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
        checkpoints = _checkpoints(data.get("checkpoints"))
        if checkpoints is None:
            return Output(
                parsed=True,
                parse_note="checkpoints malformed; ignored",
                score=score,
                justification=justification,
            )
        note = ""
        awarded = sum(c.awarded for c in checkpoints)
        if checkpoints and awarded < score:
            # The checkpoints are the accounting; a total above them is not earned.
            note = f"score {score} above its checkpoints' {awarded}; {awarded} taken"
            score = awarded
        return Output(
            parsed=True,
            parse_note=note,
            score=score,
            justification=justification,
            checkpoints=checkpoints,
        )
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
    """One grader's judgment as another grader is shown it."""
    lines = [f"Score: {output.score}/7", ""]
    if output.checkpoints:
        lines += ["Checkpoints:"]
        lines += [f"- {c.item or '(unnamed)'}: {c.awarded}/{c.max}" for c in output.checkpoints]
        lines += [""]
    lines += ["Justification:", output.justification or "(none)"]
    return "\n".join(lines)
