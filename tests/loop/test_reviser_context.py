"""The reviser sees each confirmed finding once, renumbered C1, C2, ..., never the verifiers'
own ids or how many verifiers reported it."""

from __future__ import annotations

from pathlib import Path

from tests.loop import scripts
from tests.loop.harness import ScriptedEndpoint, audit_ok, solve, state_of


def test_findings_from_several_verifiers_reach_the_reviser_once(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.fix_after_finding) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=1,
            acceptance__verifications=3,
            acceptance__verify_stage=0,  # all three run, though the first one fails it
            acceptance__cancel_on_blocking=False,
        )
    state = state_of(outcome.run_dir)
    confirmed = [c for c in state.calls.values() if c.role == "reviewer" and c.facts.confirmed]
    assert len(confirmed) == 3  # three verifiers reported the same flaw, each as its F1
    reviser = [r for r in fake.requests if scripts.role_of(r) == "reviser"]
    assert len(reviser) == 1
    text = reviser[0].user_text
    assert text.count(scripts.FLAW_FINDING["explanation"]) == 1
    assert "Finding C1 (severity: major)" in text and "C2" not in text
    assert '"id"' not in text and "F1" not in text
    assert outcome.outcome == "solved"
    audit_ok(outcome.run_dir)
