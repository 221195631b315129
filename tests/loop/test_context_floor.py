"""A role whose calls the served context would cap below its floor (``roles.<role>.min_tokens``):
none of them is sent, each is recorded failed with the reason, and the run ends on its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.errors import EndpointRefuses
from solver.loop.engine import REFUSALS_IN_A_ROW
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


def test_a_producer_always_below_the_floor_ends_the_session_with_the_fix(
    tmp_path: Path,
) -> None:
    # Failed calls spend no budget, and with a budget lineages keep starting while it
    # lasts: before issue 41 only the policy's failures in a row (candidates x
    # max_failed_rounds) ended this search, as "failed". No call of the run has completed, so
    # every one would be refused: the session ends after three, naming the setting to change.
    # The call budget is a net so that, without that bound, the test fails instead of
    # running for ever.
    with (
        ScriptedEndpoint(scripts.solved, context_length=CONTEXT) as fake,
        pytest.raises(EndpointRefuses) as caught,
    ):
        solve(
            fake,
            tmp_path,
            candidates=2,
            roles__generator__min_tokens=FLOOR,
            acceptance__max_failed_rounds=3,
            budget__total_tokens=1_000_000,
            budget__calls=500,
        )
    assert fake.requests == []  # not one call left
    assert "below the role's min_tokens of 19900" in str(caught.value)
    (run_dir,) = (tmp_path / "runs").iterdir()
    failures = _failures(run_dir)
    # the third ends the session; a call already in flight beside it may end too
    assert REFUSALS_IN_A_ROW <= len(failures) < 2 * 3
    assert {f["error_kind"] for f in failures} == {"ContextBelowFloor"}
    assert state_of(run_dir).outcome is None  # stopped, resumable; not reported "failed"
    audit_ok(run_dir)
