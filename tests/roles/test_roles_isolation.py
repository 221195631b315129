"""Isolation at the roles level: what a role is shown is built from its declared inputs only,
so markers planted where a role may not look never reach its messages."""

from __future__ import annotations

import json

from solver import roles
from solver.roles import generator, grader, reviewer, reviser, selector, verifier

REASONING = "MARKER-GENERATOR-REASONING"
SELF_CLAIM = "MARKER-SELF-ASSESSMENT"
REFERENCE = "MARKER-REFERENCE-SOLUTION"
GUIDELINES = "MARKER-GRADING-GUIDELINES"
REJECTED = "MARKER-REJECTED-FINDING"
PROBLEM = "Show that $n^2 + n$ is even for every integer $n$."

GENERATOR_REPLY = f"""<think>{REASONING}: try n = 1, 2, 3.</think>
{REASONING} leaked into the visible preamble.

## Proof

$n^2 + n = n(n+1)$ is a product of two consecutive integers, one of which is even.

## Final answer

Not applicable

## Self-assessment

Status: complete. {SELF_CLAIM}
"""

VERIFIER_REPLY = "```json\n" + json.dumps(
    {
        "findings": [
            {"id": "F1", "location": "one of which is even", "severity": "major",
             "explanation": "why is one of them even?"},
            {"id": "F2", "location": "product", "severity": "critical",
             "explanation": REJECTED},
        ],
        "verdict": "fail",
    }
) + "\n```"  # fmt: skip

REVIEWER_REPLY = json.dumps(
    {
        "reviews": [
            {"id": "F1", "decision": "confirmed", "severity": "minor", "reason": "small gap"},
            {"id": "F2", "decision": "rejected", "reason": "the factorisation is right"},
        ]
    }
)


def all_text(messages: tuple[tuple[str, str], ...]) -> str:
    return "\n".join(content for _, content in messages)


def test_markers_never_reach_a_forbidden_context() -> None:
    candidate = generator.parse(GENERATOR_REPLY)
    assert candidate.parsed and REASONING not in candidate.proof
    proof = candidate.proof

    contexts: dict[str, str] = {}
    for variant in verifier.VARIANTS:
        contexts[f"verifier/{variant}"] = all_text(
            roles.render(
                "verifier", variant, verifier.Inputs(problem_statement=PROBLEM, proof_text=proof)
            )
        )
    report = verifier.parse(VERIFIER_REPLY)
    contexts["reviewer"] = all_text(
        roles.render(
            "reviewer",
            "standard",
            reviewer.Inputs(
                problem_statement=PROBLEM,
                proof_text=proof,
                verification_report=verifier.format_report(report),
            ),
        )
    )
    review = reviewer.parse(REVIEWER_REPLY)
    confirmed = reviewer.confirmed_findings(report.findings, review)
    assert [(f.id, f.severity) for f in confirmed] == [("F1", "minor")]
    contexts["reviser"] = all_text(
        roles.render(
            "reviser",
            "standard",
            reviser.Inputs(
                problem_statement=PROBLEM,
                proof_text=proof,
                confirmed_findings=reviser.format_findings(confirmed),
            ),
        )
    )
    contexts["grader"] = all_text(
        roles.render(
            "grader", "standard", grader.Inputs(problem_statement=PROBLEM, proof_text=proof)
        )
    )
    contexts["selector"] = all_text(
        roles.render(
            "selector",
            "standard",
            selector.Inputs(problem_statement=PROBLEM, anonymised_proofs=(proof, proof)),
        )
    )
    evaluation = all_text(
        roles.render(
            "grader:evaluation",
            "rubric",
            grader.EvaluationInputs(
                problem_statement=PROBLEM,
                proof_text=proof,
                reference_solution=REFERENCE,
                grading_guidelines=GUIDELINES,
            ),
        )
    )

    for name, text in contexts.items():
        assert REASONING not in text, name
        assert SELF_CLAIM not in text, name
        assert REFERENCE not in text and GUIDELINES not in text, name
        assert PROBLEM in text and "consecutive integers" in text, name
    # The reviewer sees the report, including what it will reject; the reviser never does.
    assert REJECTED in contexts["reviewer"]
    assert REJECTED not in contexts["reviser"]
    assert "why is one of them even?" in contexts["reviser"]
    # Verifiers see no report at all.
    assert all("why is one of them even?" not in contexts[k] for k in contexts if "verifier" in k)
    # Evaluation grading sees the organisers' material, and still no reasoning.
    assert REFERENCE in evaluation and GUIDELINES in evaluation
    assert REASONING not in evaluation and SELF_CLAIM not in evaluation


def test_unaddressed_and_unparsed_reviews_confirm() -> None:
    report = verifier.parse(VERIFIER_REPLY)
    assert reviewer.confirmed_findings(report.findings, reviewer.CONSERVATIVE) == report.findings
    partial = reviewer.parse('{"reviews": [{"id": "F2", "decision": "rejected", "reason": "x"}]}')
    assert [f.id for f in reviewer.confirmed_findings(report.findings, partial)] == ["F1"]
