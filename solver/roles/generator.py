"""Generator: a complete, rigorous attempt at the problem, or an honest partial result.

Sees the problem statement only. Its reasoning (kind ``generator_reasoning``) is recorded but
reaches no other role; what other roles see is :attr:`Output.proof`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from solver.roles.base import Kind, RoleInputs, RoleOutput
from solver.roles.proof import claimed_status, extract_proof

NAME = "generator"
VARIANTS: tuple[str, ...] = ("direct", "explore-cases", "invariant-first")
TEMPLATES: dict[str, tuple[str, str]] = {
    variant: (f"generator/{variant}.system.j2", "generator/user.j2") for variant in VARIANTS
}


class Inputs(RoleInputs):
    problem_statement: Annotated[str, Kind("problem_statement"), Field(min_length=1)]


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
    """Never raises. Without a ``## Proof`` heading the visible text is taken as the proof and
    ``parsed`` is False; with no visible text at all the result is :data:`CONSERVATIVE`."""
    parts = extract_proof(text)
    if not parts.body.strip():
        return CONSERVATIVE
    return Output(
        parsed=parts.followed_contract,
        parse_note="" if parts.followed_contract else "no '## Proof' section",
        proof=parts.proof,
        body=parts.body,
        final_answer=parts.final_answer,
        self_assessment=parts.self_assessment,
        claimed_status=claimed_status(parts.self_assessment),
    )
