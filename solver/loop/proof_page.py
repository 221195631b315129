"""final/proof.md as a reader needs it: what the problem was, what the run concluded, and
whether the proof below was accepted, before the proof itself.

A proof the run did not accept (the best attempt of an unsolved run) says so in its first
lines, so nobody mistakes it for a verified proof by opening the file alone. The model's text
follows a rule, byte for byte as the model wrote it (its blob is named in result.json).
"""

from __future__ import annotations

from typing import Any

from solver.problems import Problem

__all__ = ["no_proof_page", "proof_page"]


def _title(problem: Problem) -> str:
    return " ".join((problem.title or problem.id).split())


def _problem_section(problem: Problem) -> str:
    return f"## Problem\n\n{problem.statement}\n"


def proof_page(
    problem: Problem,
    *,
    outcome: str,
    reason: str,
    accepted: bool,
    score: int | None,
    answer_check: dict[str, Any] | None,
    run_id: str,
    proof_text: str,
) -> str:
    if accepted:
        verdict = f"**Accepted.** This proof passed the run's verification (outcome: {outcome})."
    else:
        verdict = (
            "**NOT ACCEPTED. This proof did not pass the run's verification.** It is the "
            f"run's best attempt and may be wrong (outcome: {outcome})."
        )
    facts = [
        f"- why the run ended: {' '.join(reason.split())}",
        "- grade by the run's grader: " + ("ungraded" if score is None else f"{score}/7"),
    ]
    if answer_check is not None:
        facts.append(f"- final answer check: {answer_check.get('verdict')}")
    facts.append(f"- run {run_id}; `solver audit RUN` verifies this file and the whole run")
    return (
        f"# Proof: {_title(problem)}\n\n{verdict}\n\n"
        + "\n".join(facts)
        + f"\n\n{_problem_section(problem)}\n---\n\n{proof_text}"
    )


def no_proof_page(problem: Problem, *, outcome: str, reason: str) -> str:
    """Every finished run has a final/proof.md: one that says there is none, and why."""
    return (
        f"# No proof\n\nThis run produced no proof ({outcome}: {reason}).\n\n"
        f"{_problem_section(problem)}"
    )
