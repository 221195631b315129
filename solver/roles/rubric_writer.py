"""Rubric writer: drafts a marking scheme from the reference solution of a problem that has
none (no grading guidelines), so that evaluation graders measure partial credit against the
same checkpoints, as MathArena's judges do with a scheme per problem.

It runs in evaluation mode only, after the solve phase has ended: it sees the problem and the
reference solution and nothing a solver produced. Its scheme is an artifact every evaluation
grader of the run is shown.

Output contract: ``{"checkpoints": [{"item": "...", "points": <int>, "partial": "..."}]}``,
points positive and adding up to 7. Anything else parses to no scheme (``parsed`` false), and
the graders grade with the reference solution alone.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from solver.roles.base import Kind, RoleInputs, RoleOutput
from solver.roles.jsonblock import find_object, lower_keys
from solver.roles.proof import strip_thinking

NAME = "rubric_writer"
VARIANTS: tuple[str, ...] = ("standard",)
TEMPLATES: dict[str, tuple[str, str]] = {
    "standard": ("rubric_writer/system.j2", "rubric_writer/user.j2")
}
TOTAL_POINTS = 7
MAX_CHECKPOINTS = 12


class Inputs(RoleInputs):
    problem_statement: Annotated[str, Kind("problem_statement"), Field(min_length=1)]
    reference_solution: Annotated[str, Kind("reference_solution"), Field(min_length=1)]


class SchemeItem(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    item: str = Field(min_length=1)
    points: int = Field(ge=1, le=TOTAL_POINTS)
    partial: str = ""


class Output(RoleOutput):
    checkpoints: tuple[SchemeItem, ...] = ()


CONSERVATIVE = Output(parsed=False, parse_note="no marking scheme")


def _accept(value: dict[str, Any]) -> bool:
    return "checkpoints" in lower_keys(value)


def _points(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return int(number) if number.is_integer() and 1 <= number <= TOTAL_POINTS else None


def parse(text: str) -> Output:
    """Never raises; see the module docstring for the contract."""
    found = find_object(strip_thinking(text), _accept)
    if found is None:
        return CONSERVATIVE
    entries = lower_keys(found).get("checkpoints")
    if not isinstance(entries, list) or not 1 <= len(entries) <= MAX_CHECKPOINTS:
        return CONSERVATIVE.model_copy(update={"parse_note": "checkpoints missing or too many"})
    items: list[SchemeItem] = []
    for entry in entries:
        data = lower_keys(entry) if isinstance(entry, dict) else {}
        points = _points(data.get("points"))
        item = str(data.get("item", "")).strip()
        if points is None or not item:
            return CONSERVATIVE.model_copy(update={"parse_note": "a checkpoint without points"})
        partial = str(data.get("partial") or "").strip()
        items.append(SchemeItem(item=item[:2000], points=points, partial=partial[:2000]))
    total = sum(i.points for i in items)
    if total != TOTAL_POINTS:
        return CONSERVATIVE.model_copy(
            update={"parse_note": f"checkpoints add up to {total}, not {TOTAL_POINTS}"}
        )
    return Output(parsed=True, checkpoints=tuple(items))


def format_scheme(output: Output) -> str:
    """The scheme as graders are shown it: numbered checkpoints with their points."""
    lines = []
    for number, item in enumerate(output.checkpoints, start=1):
        lines.append(f"{number}. ({item.points} point{'s' if item.points > 1 else ''}) {item.item}")
        if item.partial:
            lines.append(f"   Partial credit: {item.partial}")
    return "\n".join(lines)
