"""A role whose calls the served context would cap below its floor (``roles.<role>.min_tokens``):
none of them is sent, each is recorded failed with the reason, and the run ends on its own."""

from __future__ import annotations

from pathlib import Path

from solver.store import RunReader
from solver.testing import role_of
from tests.loop import scripts
from tests.loop.harness import ScriptedEndpoint, audit_ok, result_of, solve, state_of

CONTEXT = 20_000
# Every prompt of the loop is longer than 100 tokens, so no call of the role fits its floor.
FLOOR = CONTEXT - 100


def _failures(run_dir: Path) -> list[dict[str, object]]:
    return [r.data for r in RunReader(run_dir).records() if r.type == "call.failed"]


def test_verifications_below_the_floor_fail_and_their_reissues_stay_bounded(
    tmp_path: Path,
) -> None:
    with ScriptedEndpoint(scripts.solved, context_length=CONTEXT) as fake:
        outcome = solve(
            fake,
            tmp_path,
            roles__verifier__min_tokens=FLOOR,
            acceptance__reverify_no_verdict=True,
            acceptance__max_failed_rounds=2,
        )
    state = state_of(outcome.run_dir)
    verifications = [c for c in state.calls.values() if c.role == "verifier"]
    assert verifications and all(c.status == "failed" for c in verifications)
    assert not any(role_of(r) == "verifier" for r in fake.requests)  # none was sent
    failures = _failures(outcome.run_dir)
    assert len(failures) == len(verifications)
    assert {f["error_kind"] for f in failures} == {"ContextBelowFloor"}
    assert all(f"below the call's floor of {FLOOR}" in str(f["message"]) for f in failures)
    # each failed verification was issued again, at most 2 x K per version
    per_version: dict[tuple[str, int], int] = {}
    for c in verifications:
        assert c.lineage is not None and c.version is not None
        key = (c.lineage, c.version)
        per_version[key] = per_version.get(key, 0) + 1
    assert set(per_version.values()) == {4}
    # no version passed, each lineage gave up after its failed rounds, and the run ended
    assert outcome.outcome != "solved"
    assert all(ln.abandoned for ln in state.lineages.values())
    assert result_of(outcome.run_dir)["outcome"] == outcome.outcome
    audit_ok(outcome.run_dir)


def test_a_producer_always_below_the_floor_ends_a_budget_run(tmp_path: Path) -> None:
    # Failed calls spend no budget, and with a budget lineages keep starting while it
    # lasts: only the failures in a row end this search. The call budget is a net so that,
    # without that bound, the test fails instead of running for ever.
    with ScriptedEndpoint(scripts.solved, context_length=CONTEXT) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=2,
            roles__generator__min_tokens=FLOOR,
            acceptance__max_failed_rounds=3,
            budget__total_tokens=1_000_000,
            budget__calls=500,
        )
    assert fake.requests == []  # not one call left
    failures = _failures(outcome.run_dir)
    assert len(failures) == 2 * 3  # candidates x max_failed_rounds
    assert {f["error_kind"] for f in failures} == {"ContextBelowFloor"}
    state = state_of(outcome.run_dir)
    assert not state.budget_exhausted
    assert outcome.outcome == "failed"
    phases = [
        r.data["reason"]
        for r in RunReader(outcome.run_dir).records()
        if r.type == "decision" and r.data["kind"] == "phase"
    ]
    assert phases[0] == "6 proof-writing calls in a row failed, none completed"
    audit_ok(outcome.run_dir)
