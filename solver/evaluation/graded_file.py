"""The file of proofs humans already graded, read and checked (`solver eval calibrate FILE`).

FILE is JSON Lines, one graded proof a line, in either shape:

- DeepSeekMath-V2 outputs: ``{"question", "problem_idx", "model_prediction": {"proof",
  "human_rating"}}``;
- generic: ``{"id", "problem" | "statement" | "question", "proof" | "response",
  "human_grade" | "human_rating" | "points", "reference_solution"?, "grading_guidelines"?,
  "max_points"?}``.

Human grades on another scale (``max_points``) are mapped to 0-7 before comparing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from solver.evaluation.scores import FULL_GRADE
from solver.problems import Problem, read_checked_text

MAX_FILE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class GradedProof:
    item: str
    problem: Problem
    proof: str
    human: float  # on the 0-7 scale


def _first(row: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if row.get(key) not in (None, ""):
            return row[key]
    return None


class _Ungraded(ValueError):
    """A line that names a human grade and leaves it empty (as `solver eval proofs` writes)."""


def _graded(path: Path, line_no: int, row: dict[str, Any]) -> GradedProof:
    where = f"{path}: line {line_no}"
    prediction = row.get("model_prediction")
    # DeepSeekMath-V2 outputs nest the proof and its human grade.
    merged = {**row, **prediction} if isinstance(prediction, dict) else row
    item = _first(merged, "id", "problem_idx", "item")
    statement = _first(merged, "problem", "statement", "question")
    proof = _first(merged, "proof", "response")
    human = _first(merged, "human_grade", "human_rating", "points")
    if statement is not None and proof is not None and human is None and "human_grade" in merged:
        raise _Ungraded(f"{where}: no human grade yet")
    if statement is None or proof is None or human is None:
        raise ValueError(f"{where}: needs a problem statement, a proof and a human grade")
    if not isinstance(human, int | float) or isinstance(human, bool):
        raise ValueError(f"{where}: the human grade {human!r} is not a number")
    max_points = _first(merged, "max_points") or FULL_GRADE
    if not isinstance(max_points, int | float) or max_points <= 0 or not 0 <= human <= max_points:
        raise ValueError(f"{where}: the human grade {human} is not within 0-{max_points}")
    item = str(item if item is not None else f"line-{line_no}")
    try:
        problem = Problem(
            id=item,
            statement=str(statement),
            reference_solution=_first(merged, "reference_solution", "solution"),
            grading_guidelines=_first(merged, "grading_guidelines", "rubric"),
            origin=f"{path.name}#line-{line_no}",
        )
    except ValidationError as exc:
        raise ValueError(f"{where}: {exc.errors()[0]['msg']}") from None
    return GradedProof(item, problem, str(proof), human * FULL_GRADE / max_points)


def load_graded(path: Path) -> list[GradedProof]:
    """Read FILE; every problem is one line "FILE: line N: what is wrong" (InputError)."""
    from solver.problems import input_error

    _, text = read_checked_text(path, extensions=(".jsonl",), max_bytes=MAX_FILE_BYTES)
    items: list[GradedProof] = []
    ungraded: list[int] = []
    seen: set[str] = set()
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise input_error(path, f"line {line_no}: not JSON ({exc.msg})") from None
        except RecursionError:
            raise input_error(path, f"line {line_no}: not JSON (nested too deeply)") from None
        except ValueError as exc:  # an integer of more digits than Python converts
            raise input_error(path, f"line {line_no}: not JSON ({exc})") from None
        if not isinstance(row, dict):
            raise input_error(path, f"line {line_no}: not a JSON object")
        try:
            graded = _graded(path, line_no, row)
        except _Ungraded:
            ungraded.append(line_no)
            continue
        except ValueError as exc:
            raise input_error(path, str(exc).split(": ", 1)[1]) from None
        if graded.item in seen:
            graded = GradedProof(
                f"{graded.item}@line-{line_no}", graded.problem, graded.proof, graded.human
            )
        seen.add(graded.item)
        items.append(graded)
    if ungraded:
        shown = ", ".join(map(str, ungraded[:10])) + (", ..." if len(ungraded) > 10 else "")
        raise input_error(
            path,
            f"{len(ungraded)} of {len(ungraded) + len(items)} proofs have no human grade yet "
            f"(line {shown}): write each line's human_grade before calibrating",
        )
    if not items:
        raise input_error(path, "no graded proofs in the file")
    return items
