"""Which findings count: the identity of a recurring finding, and findings whose review never
ended (they stand, as the conservative reviewer outcome says)."""

from __future__ import annotations

from typing import Any

from solver.loop.policy import PolicyConfig, verification_outcome
from solver.loop.state import CallState, RunState, confirmed_findings
from solver.loop.state import finding_keys as keys_of_finding
from solver.records import FACTS_ADAPTER
from solver.roles.verifier import ProofFinding

MINOR = {"id": "F1", "location": "the last line", "severity": "minor", "explanation": "Terse."}


def _call(call_id: str, role: str, status: str, facts: dict[str, Any]) -> CallState:
    return CallState(
        call_id=call_id,
        role=role,
        variant="v",
        phase="solve",
        lineage="L0",
        version=0,
        target="L0.v0.verify.0" if role == "reviewer" else None,
        evaluation=False,
        status=status,
        parsed_ok=status == "completed",
        facts=FACTS_ADAPTER.validate_python(facts),
    )


def _with_review(status: str, facts: dict[str, Any]) -> RunState:
    state = RunState()
    verify = _call(
        "L0.v0.verify.0", "verifier", "completed", {"verdict": "fail", "findings": [MINOR]}
    )
    review = _call("L0.v0.verify.0.review", "reviewer", status, facts)
    state.calls = {verify.call_id: verify, review.call_id: review}
    return state


def test_a_failed_review_leaves_its_findings_standing() -> None:
    state = _with_review("failed", {})
    found = confirmed_findings(state, "L0", 0)
    assert [(f.id, f.severity) for f in found] == [("F1", "minor")]
    assert verification_outcome(state, state.calls["L0.v0.verify.0"], PolicyConfig()) == "fail"


def test_a_rejecting_review_clears_a_fail_verdict() -> None:
    state = _with_review("completed", {"confirmed": [], "rejected": ["F1"], "severity": {}})
    assert confirmed_findings(state, "L0", 0) == []
    verify = state.calls["L0.v0.verify.0"]
    assert verification_outcome(state, verify, PolicyConfig()) == "pass"
    # One reviewer must not be able to pass a proof: the overturned fail is replaced instead.
    strict = PolicyConfig(overturned_fail_passes=False)
    assert verification_outcome(state, verify, strict) == "void"


def finding_keys(finding: dict[str, str]) -> set[str]:
    return keys_of_finding(ProofFinding(id="F1", **finding))  # type: ignore[arg-type]


def test_recurring_finding_keys_fold_case_whitespace_and_match_on_location() -> None:
    first = {
        "location": "Hence  $a = b$ for all n",
        "severity": "major",
        "explanation": "The step  assumes a = b without proof.",
    }
    reworded = {
        "location": "hence $a=b$ for all n",
        "severity": "critical",
        "explanation": "Nothing justifies taking a equal to b.",
    }
    restated = {
        "location": "elsewhere entirely, in the final case",
        "severity": "major",
        "explanation": "the STEP assumes a = b\nwithout proof.",
    }
    assert finding_keys(first) & finding_keys(reworded)  # same quoted passage
    assert finding_keys(first) & finding_keys(restated)  # same explanation, other spacing/case
    short = {"location": "Step 2", "severity": "major", "explanation": "Another gap."}
    assert not finding_keys(short) & finding_keys({**short, "explanation": "A third gap."})


def test_findings_with_empty_explanations_are_not_one_finding() -> None:
    """Nothing to compare is no evidence of a recurring flaw (an empty explanation once keyed
    every such finding alike, abandoning a lineage after one revision)."""
    first = {"location": "Step 2", "severity": "major", "explanation": ""}
    later = {"location": "the end", "severity": "critical", "explanation": "  "}
    assert not finding_keys(first) & finding_keys(later)


def test_explanations_sharing_a_stock_opening_are_different_findings() -> None:
    opening = (
        "The proof does not justify the claim made in this step of the whole argument, namely "
    )
    first = {"location": "", "severity": "major", "explanation": opening + "that a = b."}
    other = {"location": "", "severity": "major", "explanation": opening + "that n is odd."}
    assert len(opening) > 80
    assert not finding_keys(first) & finding_keys(other)
    assert finding_keys(first) & finding_keys(
        {**first, "explanation": first["explanation"].upper()}
    )
