"""Generator: a complete, rigorous attempt at the problem, or an honest partial result.

Sees the problem statement only. Its reasoning (kind ``generator_reasoning``) is recorded but
reaches no other role; what other roles see is :attr:`Output.proof`.

Its self-improvement turn (policy key ``generator:improve``, Huang & Yang's second turn) is
the same conversation continued: the generator's system and user messages, its own answer as
the assistant turn (the proof it wrote, as other roles see it), then one fixed user message
asking it to check and improve that solution. Same output contract.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from solver.roles.base import Kind, RoleInputs, RoleOutput
from solver.roles.proof import parse_proof_output

NAME = "generator"
VARIANTS: tuple[str, ...] = ("direct", "explore-cases", "invariant-first")
TEMPLATES: dict[str, tuple[str, ...]] = {
    variant: (f"generator/{variant}.system.j2", "generator/user.j2") for variant in VARIANTS
}
IMPROVE = "generator:improve"
# One variant per generator variant: the conversation goes on under the same system prompt.
# Later turns are numbered in their names (docs/format.md, Re-rendering prompts).
IMPROVE_TEMPLATES: dict[str, tuple[str, ...]] = {
    variant: (*turns, "generator/improve.2.assistant.j2", "generator/improve.3.user.j2")
    for variant, turns in TEMPLATES.items()
}


class Inputs(RoleInputs):
    problem_statement: Annotated[str, Kind("problem_statement"), Field(min_length=1)]


class ImproveInputs(RoleInputs):
    """The self-improvement turn: the problem and the generator's own first proof."""

    problem_statement: Annotated[str, Kind("problem_statement"), Field(min_length=1)]
    proof_text: Annotated[str, Kind("proof_text"), Field(min_length=1)]


class Output(RoleOutput):
    """``proof`` is the text verifiers and every later role see (see roles.proof)."""

    proof: str
    body: str
    final_answer: str | None
    self_assessment: str
    claimed_status: Literal["complete", "partial", "unknown"]

    @property
    def usable(self) -> bool:
        """False when there is no proof text at all: the attempt failed, nothing to verify."""
        return bool(self.body.strip())


CONSERVATIVE = Output(
    parsed=False,
    parse_note="no proof text",
    proof="",
    body="",
    final_answer=None,
    self_assessment="",
    claimed_status="unknown",
)


def parse(text: str) -> Output:
    """Never raises (see ``proof.parse_proof_output``)."""
    return parse_proof_output(text, Output, CONSERVATIVE)
