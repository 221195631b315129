"""A proof written from other proofs (a revision, a recombination, the generator's second turn)
must stand alone: talk about findings, reviewers, earlier versions or answers, or the
candidates it was shown makes it unusable (the verifiers and the selector would see it)."""

from __future__ import annotations

import pytest

from solver.roles import generator, reviser
from solver.roles.reviser import commentary


@pytest.mark.parametrize(
    "text",
    [
        "Fixing C2: we now justify the bound.",
        "As the reviewer noted, the case n = 1 was missing; it is handled here.",
        "Unlike the previous version, we prove Lemma 2 directly.",
        "This addresses the finding C1 about the limit.",
        "In this revision the induction starts at n = 2.",
        "Fixing C2, the bound now holds for every n.",
        "Unlike my first attempt, we use the invariant mod 3.",
        "As in the earlier answer, the case n = 1 is trivial.",
        "We follow Attempt B for the construction.",
        "Candidate A had a gap here, which we close as follows.",
        "Combining the proofs above, the claim follows.",
        "Unlike the other proofs, we work modulo 8.",
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
        "The candidate a = 3 works, and no other does.",
        "The first solution of the equation is x = 2.",
        "Every attempt to colour the board with two colours fails at the corner.",
    ],
)
def test_mathematics_is_not_commentary(text: str) -> None:
    assert commentary(text) is None


def test_commentary_in_the_final_answer_is_found() -> None:
    text = (
        "## Proof\n\nLet n be odd. Then n^2 is odd.\n\n## Final answer\n\n"
        "$\\boxed{2}$ (as the reviewer asked)\n\n## Self-assessment\n\nStatus: complete."
    )
    parsed = reviser.parse(text)
    assert commentary(parsed.body) is None
    assert commentary(parsed.proof) is not None  # what other roles see includes the answer


def test_generator_and_reviser_read_a_proof_alike() -> None:
    text = (
        "<think>scratch</think>Intro.\n\n## Proof\n\nStep one.\n\n## Final answer\n\n"
        "$\\boxed{4}$\n\n## Self-assessment\n\nStatus: partial.\n\n"
        "## Response to findings\n\nC1 fixed."
    )
    gen, rev = generator.parse(text), reviser.parse(text)
    assert gen.model_dump() == {k: v for k, v in rev.model_dump().items() if k != "responses"}
    assert rev.responses == "C1 fixed." and gen.claimed_status == "partial"
    assert generator.parse("") is generator.CONSERVATIVE
    assert reviser.parse("<think>only thinking</think>") is reviser.CONSERVATIVE
