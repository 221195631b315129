"""The reviser is shown one finding per flaw: two verifiers wording one flaw differently (case,
punctuation, spacing) are merged at the most severe severity, as the loop's recurrence check
already counts them as one."""

from __future__ import annotations

from solver.roles import reviser
from solver.roles.verifier import ProofFinding


def _finding(ident: str, severity: str, location: str, explanation: str) -> ProofFinding:
    return ProofFinding(id=ident, location=location, severity=severity, explanation=explanation)  # type: ignore[arg-type]


def test_one_flaw_worded_twice_reaches_the_reviser_once_at_its_worst_severity() -> None:
    first = _finding("F1", "major", "Hence a = b.", "The step assumes a = b without proof.")
    second = _finding("F2", "critical", "hence a=b", "the STEP assumes a=b, without proof!")
    other = _finding("F1", "minor", "In the last line", "A different, unrelated complaint.")
    text = reviser.format_findings([first, second, other])
    assert text.count("### Finding") == 2
    assert text.startswith("### Finding C1 (severity: critical)\nLocation: Hence a = b.")
    assert "### Finding C2 (severity: minor)" in text


def test_findings_with_nothing_specific_are_kept_apart() -> None:
    vague = [_finding("F1", "major", "", ""), _finding("F2", "major", "step 2", "gap")]
    assert reviser.format_findings(vague).count("### Finding") == 2
