"""Selector: pick the submission among accepted (or best partial) candidates.

Sees the problem and the candidates' proof texts, anonymised and already shuffled by the
engine (with a recorded seed), shown as "Proof A", "Proof B", ... The "pairwise" variant is
shown exactly two, Proof A and Proof B (one match of the loop's bracket). Output contract:
``{"choice": "<letter>", "reason": "..."}``. Output that does not name one of the shown proofs
gives ``choice=None``: the policy then ranks the candidates by pass rate and grade instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field

from solver.roles.base import Kind, RoleInputs, RoleOutput, label_index
from solver.roles.facts import SelectionFacts
from solver.roles.jsonblock import find_object, lower_keys
from solver.roles.proof import strip_thinking

NAME = "selector"
VARIANTS: tuple[str, ...] = ("standard", "pairwise")
# "pairwise": two proofs, A and B, one match of the loop's bracket (shown in both orders).
TEMPLATES: dict[str, tuple[str, str]] = {
    "standard": ("selector/system.j2", "selector/user.j2"),
    "pairwise": ("selector/pairwise.system.j2", "selector/user.j2"),
}
MAX_SHOWN = 26 * 27  # labels A..ZZ


class Inputs(RoleInputs):
    problem_statement: Annotated[str, Kind("problem_statement"), Field(min_length=1)]
    anonymised_proofs: Annotated[
        tuple[str, ...],
        Kind("anonymised_proofs"),
        Field(min_length=1, max_length=MAX_SHOWN, strict=False),
    ]


class Output(RoleOutput):
    choice: int | None = Field(default=None, ge=0)
    reason: str = ""

    def index_within(self, shown: int) -> int | None:
        """The chosen position if it names one of the ``shown`` proofs, else None."""
        if self.choice is None or self.choice >= shown:
            return None
        return self.choice

    def facts(self, shown: Sequence[tuple[str, int]]) -> SelectionFacts:
        """The proofs shown (lineage, version), in order, and the one chosen, if it is one
        of them."""
        index = self.index_within(len(shown))
        if index is None:
            return SelectionFacts(shown=list(shown))
        return SelectionFacts(shown=list(shown), choice=shown[index])


CONSERVATIVE = Output(parsed=False, parse_note="no choice", choice=None)


def _choice(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None  # the contract asks for a letter; a bare number is ambiguous (0- or 1-based)
    text = re.sub(r"(?i)^\s*proof\s+", "", str(value)).strip().strip(".*()[]\"'")
    if len(text) > 2:
        return None
    return label_index(text)


def _accept(value: dict[str, Any]) -> bool:
    keys = lower_keys(value)
    return "choice" in keys or "selected" in keys or "chosen" in keys


_PROSE = re.compile(
    r"\b(?:choice|choose|chosen|select(?:ed)?|pick|submit)\b[^A-Za-z\n]{0,12}"
    r"(?:is\s+)?(?:proof\s+)?\**([A-Z]{1,2})\b",
    re.IGNORECASE,
)


def parse(text: str) -> Output:
    """Never raises; see the module docstring for the contract."""
    visible = strip_thinking(text)
    found = find_object(visible, _accept)
    if found is not None:
        data = lower_keys(found)
        choice = _choice(data.get("choice", data.get("selected", data.get("chosen"))))
        reason = str(data.get("reason", data.get("justification", ""))).strip()
        if choice is None:
            return CONSERVATIVE.model_copy(update={"parse_note": "choice is not a proof label"})
        return Output(parsed=True, choice=choice, reason=reason)
    matches = [m for m in _PROSE.findall(visible) if m.isupper()]
    if matches:
        choice = label_index(matches[-1])
        if choice is not None:
            return Output(parsed=True, parse_note="choice read from prose", choice=choice)
    return CONSERVATIVE
