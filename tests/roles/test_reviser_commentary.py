"""A revision must be a standalone proof: talk about findings, reviewers or earlier versions
inside it makes it unusable (the verifiers and the selector would see it)."""

from __future__ import annotations

import pytest

from solver.roles.reviser import commentary


@pytest.mark.parametrize(
    "text",
    [
        "Fixing C2: we now justify the bound.",
        "As the reviewer noted, the case n = 1 was missing; it is handled here.",
        "Unlike the previous version, we prove Lemma 2 directly.",
        "This addresses the finding C1 about the limit.",
        "In this revision the induction starts at n = 2.",
    ],
)
def test_commentary_is_found(text: str) -> None:
    assert commentary(f"Let n be an integer.\n\n{text}\n\nHence the claim.") is not None


@pytest.mark.parametrize(
    "text",
    [
        "Let C1 and C2 be the circles through A and B.",
        "Finding the minimum of f on [0, 1] gives the bound.",
        "We fix an integer k and address each residue class in turn.",
        "The original statement is equivalent to the claim for n + 1.",
    ],
)
def test_mathematics_is_not_commentary(text: str) -> None:
    assert commentary(text) is None
