"""ScriptedClient at the ModelClient seam: the same journal records and audit as over HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.store import RunReader
from solver.testing import FakeEndpoint
from tests.loop import scripts
from tests.loop.harness import ScriptedEndpoint, audit_ok, solve, state_of


def _records(run_dir: Path) -> list[tuple[str, str]]:
    """Record types with the call they belong to, in journal order (ids are per run)."""
    out = []
    for rec in RunReader(run_dir).records():
        if rec.type in ("llm.started", "llm.completed", "net.connect", "call.completed"):
            out.append((rec.type, str(rec.data.get("call_id", ""))))
    return out


def _per_call(records: list[tuple[str, str]]) -> dict[str, list[str]]:
    calls: dict[str, list[str]] = {}
    for type_, call_id in records:
        if type_ != "net.connect":
            calls.setdefault(call_id, []).append(type_)
    return calls


def test_scripted_run_has_the_records_and_audit_of_an_http_run(tmp_path: Path) -> None:
    (tmp_path / "http").mkdir()
    (tmp_path / "seam").mkdir()
    # Both verifications of a version run to the end: whether one still running is cancelled
    # when the other fails depends on which transport answers first, not on the seam.
    settings = {"candidates": 1, "acceptance__cancel_on_blocking": False}
    with FakeEndpoint(scripts.fix_after_finding) as fake:
        over_http = solve(fake, tmp_path / "http", **settings)
    with ScriptedEndpoint(scripts.fix_after_finding) as scripted:
        in_process = solve(scripted, tmp_path / "seam", **settings)
    assert in_process.outcome == over_http.outcome == "solved"
    a, b = _records(over_http.run_dir), _records(in_process.run_dir)
    assert _per_call(a) == _per_call(b)
    assert any(t == "net.connect" for t, _ in b)  # the network check has evidence to judge
    audit_ok(in_process.run_dir)
    # the same requests reached the model, byte for byte (calls in flight together may
    # reach a server in either order)
    assert sorted(r.body for r in scripted.requests) == sorted(r.body for r in fake.requests)


def test_scripted_usage_and_finish_reach_the_state(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.truncated) as scripted:
        outcome = solve(
            scripted,
            tmp_path,
            candidates=1,
            acceptance__max_failed_rounds=1,
            acceptance__max_lineages=1,
        )
    state = state_of(outcome.run_dir)
    generators = [c for c in state.calls.values() if c.role == "generator"]
    assert generators and all(c.truncated and c.finish_reason == "length" for c in generators)
    assert state.tokens_out > 0 and state.tokens_in > 0
    audit_ok(outcome.run_dir)


def test_an_exhausted_strict_script_is_a_loud_test_error(tmp_path: Path) -> None:
    # A list of replies is a strict script, as with FakeEndpoint; an extra request is a bug
    # in the test, so it surfaces instead of being answered.
    with ScriptedEndpoint([]) as scripted, pytest.raises(AssertionError, match="no reply left"):
        solve(scripted, tmp_path, candidates=1)
