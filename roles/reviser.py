"""Reviser: repair one candidate using the confirmed findings only.

Sees the problem, the parent proof text and the confirmed findings (quote, severity,
explanation; no verifier identity, no counts, no rejected findings). Output contract: the
generator's sections (``## Proof``, ``## Final answer``, ``## Self-assessment``) plus
``## Response to findings`` saying, per finding, fixed or disputed and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from pydantic import Field

from roles import generator
from roles.base import Kind, RoleInputs
from roles.proof import claimed_status, extract_proof
from roles.verifier import Finding

NAME = "reviser"
VARIANTS: tuple[str, ...] = ("standard",)
TEMPLATES: dict[str, tuple[str, str]] = {"standard": ("reviser/system.j2", "reviser/user.j2")}


class Inputs(RoleInputs):
    problem_statement: Annotated[str, Kind("problem_statement"), Field(min_length=1)]
    proof_text: Annotated[str, Kind("proof_text"), Field(min_length=1)]
    confirmed_findings: Annotated[str, Kind("confirmed_findings"), Field(min_length=1)]


class Output(generator.Output):
    """The generator's output plus the reply to each finding."""

    responses: str


CONSERVATIVE = Output(
    parsed=False,
    parse_note="no proof text",
    proof="",
    body="",
    final_answer=None,
    self_assessment="",
    responses="",
    claimed_status="unknown",
)


def parse(text: str) -> Output:
    """Never raises. A reply without proof text is :data:`CONSERVATIVE` (the revision
    failed; the lineage keeps its parent)."""
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
        responses=parts.responses,
        claimed_status=claimed_status(parts.self_assessment),
    )


def format_findings(findings: Sequence[Finding]) -> str:
    """Confirmed findings as the reviser is shown them: renumbered C1, C2, ... (so no verifier
    identity or report structure shows through), duplicates removed, order kept."""
    seen: set[tuple[str, str, str]] = set()
    blocks: list[str] = []
    for finding in findings:
        key = (finding.location.strip(), finding.severity, finding.explanation.strip())
        if key in seen:
            continue
        seen.add(key)
        blocks.append(
            f"### Finding C{len(blocks) + 1} (severity: {finding.severity})\n"
            f"Location: {finding.location or '(not given)'}\n"
            f"Explanation: {finding.explanation or '(not given)'}"
        )
    return "\n\n".join(blocks)
