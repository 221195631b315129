"""Parsers: the output contracts, tolerant reading of GLM-style output, conservative outcomes."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from solver import roles
from solver.roles import generator, grader, reviewer, reviser, selector, verifier

GENERATOR_REPLY = """<think>Let me try small cases. SECRET-REASONING-MARKER</think>
I will now write the solution.

## Proof

Let the integers be $2a+1$ and $2b+1$.

### Step 1

Their sum is $2(a+b+1)$, which is even.

## Final answer

$\\boxed{\\text{even}}$

## Self-assessment

Status: complete. I am very confident. SELF-CLAIM-MARKER
"""


def test_extract_proof_keeps_proof_and_answer_only() -> None:
    parts = roles.extract_proof(GENERATOR_REPLY)
    assert parts.followed_contract
    assert "SECRET-REASONING-MARKER" not in parts.proof
    assert "SELF-CLAIM-MARKER" not in parts.proof
    assert "I will now write" not in parts.proof
    assert "### Step 1" in parts.proof and "2(a+b+1)" in parts.proof
    assert parts.final_answer == "$\\boxed{\\text{even}}$"
    assert parts.proof.startswith("## Proof\n\n")
    assert "## Final answer" in parts.proof
    assert "SELF-CLAIM-MARKER" in parts.self_assessment


@pytest.mark.parametrize(
    "text",
    [
        "<think>thinking MARK</think>## Proof\nbody",
        "thinking MARK</think>## Proof\nbody",  # server dropped the opening tag
        "## Proof\nbody<think>thinking MARK",  # cut off mid-thought
        "<THINKING>MARK</THINKING>\n## Proof\nbody",
    ],
)
def test_thinking_is_stripped(text: str) -> None:
    parts = roles.extract_proof(text)
    assert "MARK" not in parts.proof
    assert parts.body == "body"


def test_extract_proof_without_the_contract_keeps_the_visible_text() -> None:
    parts = roles.extract_proof("Since 3 is odd, done.\n\n**Self-assessment:**\nStatus: partial")
    assert not parts.followed_contract
    assert parts.body == "Since 3 is odd, done."
    assert "partial" in parts.self_assessment


def test_generator_parse() -> None:
    out = generator.parse(GENERATOR_REPLY)
    assert out.parsed and out.usable
    assert out.claimed_status == "complete"
    assert out.proof == roles.extract_proof(GENERATOR_REPLY).proof
    assert generator.parse("") == generator.CONSERVATIVE
    assert generator.parse("<think>only thinking, never finished") == generator.CONSERVATIVE
    assert not generator.CONSERVATIVE.usable
    loose = generator.parse("The answer follows since 2 | 4.")
    assert loose.usable and not loose.parsed


def test_reviser_parse_keeps_responses_out_of_the_proof() -> None:
    reply = (
        "## Proof\nFixed argument.\n\n## Self-assessment\nStatus: complete\n\n"
        "## Response to findings\nC1: fixed - added the missing case."
    )
    out = reviser.parse(reply)
    assert out.parsed and out.body == "Fixed argument."
    assert "C1" in out.responses and "C1" not in out.proof
    assert reviser.parse("   ") == reviser.CONSERVATIVE


def finding(ident: str, severity: str) -> dict[str, str]:
    return {"id": ident, "location": "their sum", "severity": severity, "explanation": "why"}


def test_verifier_round_trip_and_the_pass_rule() -> None:
    body = {"findings": [finding("F1", "minor")], "verdict": "pass"}
    out = verifier.parse(f"Looks fine.\n```json\n{json.dumps(body)}\n```")
    assert out.parsed and out.passed
    assert out.findings == (
        verifier.ProofFinding(id="F1", location="their sum", severity="minor", explanation="why"),
    )
    body = {"findings": [finding("F1", "major gap")], "verdict": "pass"}
    out = verifier.parse(json.dumps(body))
    assert out.parsed and not out.passed and out.stated_verdict == "pass"
    assert out.blocking_findings[0].severity == "major"
    out = verifier.parse(json.dumps({"findings": [], "verdict": "FAIL"}))
    assert out.parsed and not out.passed


def test_verifier_reads_glm_style_output() -> None:
    # LaTeX with single backslashes inside JSON strings, trailing comma, prose after the block.
    reply = (
        "<think>hmm</think>**Analysis.** The step is wrong.\n\n```json\n"
        '{"findings": [{"id": "F1", "location": "$\\frac{a}{b} \\geq 1$", '
        '"severity": "Critical Error", "explanation": "false for $b>a$",},], '
        '"verdict": "fail"}\n```\nThat is all.'
    )
    out = verifier.parse(reply)
    assert out.parsed and out.verdict == "fail"
    assert out.findings[0].severity == "critical"
    assert out.findings[0].location == "$\\frac{a}{b} \\geq 1$"


def test_verifier_conservative_outcomes() -> None:
    assert verifier.parse("I could not decide.") == verifier.CONSERVATIVE
    assert not verifier.CONSERVATIVE.passed
    out = verifier.parse('{"findings": [], "verdict": "perhaps"}')
    assert not out.parsed and not out.passed
    assert not verifier.parse("Verdict: pass, apart from a major gap in step 2").passed


@pytest.mark.parametrize(
    "text",
    [
        "Verdict: PASS",
        "I found a serious gap in the induction step: the base case is never checked.\n\n"
        "Verdict: pass",
    ],
)
def test_verifier_prose_pass_is_the_conservative_fail(text: str) -> None:
    out = verifier.parse(text)
    assert not out.passed and not out.parsed and out.verdict == "fail"


def test_verifier_prose_fail_is_kept() -> None:
    out = verifier.parse("The bound in step 3 is false.\n\nVerdict: FAIL")
    assert out.parsed and out.verdict == "fail" and out.stated_verdict == "fail"
    # A fail anywhere in prose wins over a later pass.
    assert not verifier.parse("Verdict: fail.\nOn reflection... Verdict: pass").passed


@pytest.mark.parametrize(
    "verdict",
    ["pass with reservations: not fully rigorous", "pass, but not rigorous", "PASS?? mostly"],
)
def test_verifier_qualified_json_pass_is_a_fail(verdict: str) -> None:
    out = verifier.parse(json.dumps({"findings": [], "verdict": verdict}))
    assert out.parsed and not out.passed and out.verdict == "fail"
    assert out.stated_verdict == "fail" and "qualified" in out.parse_note


@pytest.mark.parametrize("verdict", ["pass", "PASS.", "Passed", True])
def test_verifier_bare_json_pass_passes(verdict: object) -> None:
    assert verifier.parse(json.dumps({"findings": [], "verdict": verdict})).passed


def test_verifier_assigns_missing_and_duplicate_ids() -> None:
    body = {"findings": [finding("", "minor"), finding("X", "minor"), finding("X", "minor")]}
    out = verifier.parse(json.dumps({**body, "verdict": "pass"}))
    assert [f.id for f in out.findings] == ["F1", "X", "X'"]


def test_format_report_and_findings() -> None:
    out = verifier.parse(
        json.dumps({"findings": [finding("F1", "major"), finding("F2", "minor")], "verdict": "x"})
    )
    report = verifier.format_report(out)
    assert "Finding F1 (severity: major)" in report and "their sum" in report
    other = out.findings[1].model_copy(update={"explanation": "another reason"})
    text = reviser.format_findings([out.findings[0], out.findings[0], other])
    assert text.count("### Finding") == 2 and "C1" in text and "C2" in text
    assert "F1" not in text


def test_reviewer_round_trip_and_default_confirmation() -> None:
    body = {
        "reviews": [
            {"id": "F1", "decision": "rejected", "reason": "the step is justified"},
            {"id": "F2", "decision": "confirmed", "severity": "critical", "reason": "yes"},
        ]
    }
    out = reviewer.parse(f"```json\n{json.dumps(body)}\n```")
    assert out.parsed
    assert out.decision_for("F1").decision == "rejected"
    assert out.decision_for("F2").severity == "critical"
    missing = out.decision_for("F3", "minor")
    assert missing.decision == "confirmed" and missing.severity == "minor"
    assert reviewer.parse("no idea").decision_for("F1").decision == "confirmed"
    assert reviewer.parse("no idea") == reviewer.CONSERVATIVE
    prose = reviewer.parse("F1: rejected, the bound holds.\nF2 - confirmed, a real gap.")
    assert prose.decision_for("F2").decision == "confirmed"
    assert prose.decision_for("F2").reason == "a real gap."
    contradictory = reviewer.parse("F1: rejected\nF1: confirmed")
    assert contradictory.decision_for("F1").decision == "confirmed"


@pytest.mark.parametrize(
    "text",
    [
        "F1 should not be rejected; it is a real gap.",
        "F1: rejected, the bound holds.",
        "F1 - REJECTED",
    ],
)
def test_reviewer_prose_never_rejects(text: str) -> None:
    out = reviewer.parse(text)
    assert out.decision_for("F1", "major").decision == "confirmed"
    assert reviewer.confirmed_findings(
        (verifier.ProofFinding(id="F1", location="x", severity="major", explanation="y"),), out
    )


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        ("rejected", "rejected"),
        ("Rejected.", "rejected"),
        ("not confirmed", "rejected"),
        ("rejected, although it is a real gap", "confirmed"),
        ("should not be rejected", "confirmed"),
        ("no", "confirmed"),
        (False, "confirmed"),
        ("confirmed", "confirmed"),
    ],
)
def test_reviewer_rejects_only_on_a_bare_structured_rejection(
    decision: object, expected: str
) -> None:
    body = {"reviews": [{"id": "F1", "decision": decision, "reason": "r"}]}
    assert reviewer.parse(json.dumps(body)).decision_for("F1").decision == expected


@pytest.mark.parametrize(
    ("text", "score", "parsed"),
    [
        ('```json\n{"score": 6, "justification": "small slip"}\n```', 6, True),
        ('{"Score": "5/7", "justification": "gap"}', 5, True),
        ('{"score": 6.5, "justification": "x"}', 6, True),
        ('{"score": 9, "justification": "x"}', 0, False),
        ('{"score": "seven"}', 0, False),
        ("<points>4</points>", 4, True),
        ("Final score: 3/7", 3, True),
        # prose that states two scores is read at the lower one, not the last one
        ("Final score: 3/7. A complete solution would earn full points 7.", 3, True),
        ("Grade: 5. <points>2</points>", 2, True),
        ("The proof is fine.", 0, False),
        ("", 0, False),
    ],
)
def test_grader_parse(text: str, score: int, parsed: bool) -> None:
    out = grader.parse(text)
    assert (out.score, out.parsed) == (score, parsed)


def test_grader_judgment_format() -> None:
    out = grader.parse('{"score": 2, "justification": "only a lemma"}')
    assert grader.format_judgment(out).startswith("Score: 2/7")


@pytest.mark.parametrize(
    ("text", "choice"),
    [
        ('```json\n{"choice": "B", "reason": "complete"}\n```', 1),
        ('{"choice": "Proof C"}', 2),
        ('{"choice": "AA"}', 26),
        ("After comparing, I choose Proof B.", 1),
        ('{"choice": 2}', None),  # a number is ambiguous (0- or 1-based): refused
        ('{"choice": "the best one"}', None),
        ("They are all good.", None),
    ],
)
def test_selector_parse(text: str, choice: int | None) -> None:
    out = selector.parse(text)
    assert out.choice == choice
    assert out.parsed == (choice is not None)


def test_selector_choice_must_be_among_the_shown() -> None:
    out = selector.parse('{"choice": "D"}')
    assert out.index_within(4) == 3
    assert out.index_within(3) is None
    assert selector.CONSERVATIVE.index_within(3) is None


PARSERS = [roles.get_role(key).parse for key in roles.POLICY_KEYS]

# Text built from the pieces parsers look for, so hypothesis reaches the interesting branches.
PIECES = st.sampled_from(
    [
        "{",
        "}",
        "[",
        "]",
        '"',
        "\\",
        ",",
        ":",
        "```json\n",
        "```",
        "<think>",
        "</think>",
        "## Proof\n",
        "## Final answer\n",
        "## Self-assessment\n",
        "**Answer:**\n",
        '"verdict"',
        '"findings"',
        '"score"',
        '"choice"',
        '"reviews"',
        '"id"',
        "pass",
        "fail",
        "critical",
        "7",
        "-1",
        "1e999",
        "NaN",
        "Proof B",
        "F1",
        "\n",
        " ",
        "\u00e9",
        "\x00",
    ]
)
TEXTS = st.one_of(st.text(max_size=400), st.lists(PIECES, max_size=60).map("".join))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS)
def test_parse_never_raises(text: str) -> None:
    for parse in PARSERS:
        out = parse(text)
        assert isinstance(out, roles.RoleOutput)
    roles.extract_proof(text)


def test_parse_is_fast_on_long_adversarial_text() -> None:
    """Deeply nested, unbalanced braces over ~300 kB: every parser gives up cleanly."""
    text = ("{" * 5000) + ('"a": [' * 2000) + "\\frac{1}{2} " * 20000
    assert verifier.parse(text) == verifier.CONSERVATIVE
    assert reviewer.parse(text) == reviewer.CONSERVATIVE
    assert grader.parse(text) == grader.CONSERVATIVE
    assert selector.parse(text) == selector.CONSERVATIVE
    assert not generator.parse(text).parsed


def test_not_applicable_is_no_final_answer() -> None:
    parts = roles.extract_proof("## Proof\nbody\n\n## Final answer\nNot applicable.\n")
    assert parts.final_answer is None
    assert "Not applicable" in parts.proof
