"""Wall-clock and token budgets: the loop stops cleanly with calls in flight, cancels them on
the record, and reports an honest outcome; new calls never promise more tokens than are left."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from solver.store import RunReader
from tests.fakes.fake_endpoint import FakeEndpoint, Fault, RecordedRequest, Reply
from tests.loop import harness, scripts
from tests.loop.harness import audit_ok, result_of, solve, state_of

STALL = Fault(stall_after_chunks=1, stall_seconds=60.0)


def _stalled(reply: Reply) -> Reply:
    reply.fault = STALL
    return reply


def _generators_stall(request: RecordedRequest) -> Reply:
    reply = scripts.solved(request)
    return _stalled(reply) if scripts.role_of(request) == "generator" else reply


def _first_generator_fast(usage: tuple[int, int]) -> Callable[[RecordedRequest], Reply]:
    """The first generator request answers at once, reporting ``usage``; later ones stall."""
    lock = threading.Lock()
    seen = [0]

    def responder(request: RecordedRequest) -> Reply:
        reply = scripts.solved(request)
        if scripts.role_of(request) != "generator":
            return reply
        with lock:
            seen[0] += 1
            first = seen[0] == 1
        if first:
            reply.usage = usage
            return reply
        return _stalled(reply)

    return responder


def _max_tokens_sent(run_dir: Path) -> dict[str, int]:
    return {
        rec.data["call_id"]: int(rec.data["params"]["max_tokens"])
        for rec in RunReader(run_dir).records()
        if rec.type == "llm.started"
    }


def test_wall_clock_budget_cancels_the_call_in_flight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []

    class Recording(harness.QuietProgress):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.events = events

    monkeypatch.setattr(harness, "QuietProgress", Recording)
    with FakeEndpoint(_generators_stall) as fake:
        outcome = solve(fake, tmp_path, candidates=1, budget__wall_clock_s=1.0)
    assert "end L0.v0.generate" in events  # the live view no longer shows it in flight
    state = state_of(outcome.run_dir)
    result = result_of(outcome.run_dir)
    assert state.budget_exhausted.startswith("wall clock")
    assert state.calls["L0.v0.generate"].status == "cancelled"
    # No proof at all: the search was stopped, so the run is unsolved, not failed.
    assert outcome.outcome == "unsolved"
    assert "no model call completed" not in result["reason"]
    assert result["selected"] is None
    audit_ok(outcome.run_dir)


def test_token_budget_cancels_the_call_in_flight(tmp_path: Path) -> None:
    with FakeEndpoint(_first_generator_fast((3000, 2000))) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=2,
            budget__total_tokens=5000,
            roles__generator__max_tokens=2000,
        )
    state = state_of(outcome.run_dir)
    assert state.budget_exhausted.startswith("token budget")
    generators = sorted(
        (c for c in state.calls.values() if c.role == "generator"), key=lambda c: c.call_id
    )
    assert sorted(c.status for c in generators) == ["cancelled", "completed"]
    # The one proof is graded and selected; it was never verified, so it is not solved.
    assert outcome.outcome == "partial"
    assert result_of(outcome.run_dir)["score"] == 7
    audit_ok(outcome.run_dir)


def test_new_calls_are_capped_by_the_tokens_left(tmp_path: Path) -> None:
    with FakeEndpoint(_first_generator_fast((3000, 2000))) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=3,
            concurrency=8,
            budget__total_tokens=3000,
            roles__generator__max_tokens=2000,
        )
    sent = _max_tokens_sent(outcome.run_dir)
    solve_calls = {k: v for k, v in sent.items() if k.startswith("L")}
    # 2000 for the first, the 1000 left for the second, and the third waits (never sent)
    # because the budget is promised to the two in flight; the first then spends it all.
    assert sorted(solve_calls.values()) == [1000, 2000]
    assert sum(solve_calls.values()) <= 3000
    assert outcome.outcome == "partial"
    audit_ok(outcome.run_dir)
