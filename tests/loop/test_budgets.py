"""Wall-clock and token budgets: the loop stops cleanly with calls in flight, cancels them on
the record, and reports an honest outcome; new calls never promise more tokens than are left."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from solver.store import RunReader
from solver.testing import FakeEndpoint, RecordedRequest
from solver.testing.fake_endpoint import Fault, Reply
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


def _completed_usage(run_dir: Path, prefix: str = "L") -> int:
    """Input plus output the endpoint reported for the attempts of solve calls that completed."""
    return sum(
        int(rec.data["usage"]["input_tokens"]) + int(rec.data["usage"]["output_tokens"])
        for rec in RunReader(run_dir).records()
        if rec.type == "llm.completed" and rec.data["call_id"].startswith(prefix)
    )


def test_new_calls_are_capped_by_the_tokens_left(tmp_path: Path) -> None:
    total = 6000
    with FakeEndpoint(_first_generator_fast((300, 200))) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=3,
            concurrency=8,
            budget__total_tokens=total,
            roles__generator__max_tokens=100_000,
        )
    sent = _max_tokens_sent(outcome.run_dir)
    generators = {k: v for k, v in sent.items() if k.endswith(".generate")}
    # Each candidate is given at most its share of the budget, less its prompt, so all
    # three run side by side instead of the first taking everything.
    assert len(generators) == 3
    assert all(v < total // 3 for v in generators.values())
    assert _completed_usage(outcome.run_dir) <= total
    audit_ok(outcome.run_dir)


def _honours_max_tokens(request: RecordedRequest) -> Reply:
    """``never_accepted``, with usage as a server reports it: the prompt's tokens, and output
    cut at the request's max_tokens (a server never writes more than it was allowed)."""
    reply = scripts.never_accepted(request)
    allowed = int(request.json.get("max_tokens") or 10**9)
    prompt = (len(request.system_text) + len(request.user_text)) // 4 + 1
    produced = (len(reply.text) + len(reply.reasoning)) // 4 + 1
    if produced > allowed:
        reply.text, reply.reasoning, reply.finish_reason = reply.text[: allowed * 4], "", "length"
    reply.usage = (prompt, min(produced, allowed))
    return reply


def test_prompts_count_against_the_token_budget(tmp_path: Path) -> None:
    """The budget counts input and output, so a call reserves its prompt as well as its
    max_tokens: calls that complete never spend more than the budget between them."""
    total = 4000
    with FakeEndpoint(_honours_max_tokens) as fake:
        outcome = solve(fake, tmp_path, candidates=2, budget__total_tokens=total)
    state = state_of(outcome.run_dir)
    assert state.budget_exhausted.startswith("token budget")
    assert _completed_usage(outcome.run_dir) <= total
    audit_ok(outcome.run_dir)


def _generators_stall_late(request: RecordedRequest) -> Reply:
    reply = scripts.solved(request)
    if scripts.role_of(request) == "generator":
        reply.fault = Fault(stall_after_chunks=4, stall_seconds=60.0)
    return reply


def test_a_call_cut_mid_stream_counts_what_it_spent(tmp_path: Path) -> None:
    with FakeEndpoint(_generators_stall_late) as fake:
        outcome = solve(fake, tmp_path, candidates=1, budget__wall_clock_s=1.0)
    state = state_of(outcome.run_dir)
    # The cut attempt's end (failed as cancelled, or abandoned) carries what it spent.
    (cut,) = [
        r
        for r in RunReader(outcome.run_dir).records()
        if r.type in ("llm.failed", "llm.abandoned") and r.data.get("usage")
    ]
    usage = cut.data["usage"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    spent = usage["input_tokens"] + usage["output_tokens"]
    assert state.calls["L0.v0.generate"].tokens == spent
    assert state.tokens_by_role["generator"] == spent == state.tokens_total
    audit_ok(outcome.run_dir)


def test_no_call_starts_below_its_roles_floor(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``roles.<role>.min_tokens``: the same run as above (prompts counted, output cut at the
    cap), with a floor. Every solve call is sent at least the floor; when the budget left cannot
    give the next call that much, the run says the budget has ended, naming the floor, instead
    of starting a call that could not write an answer."""
    total, floor = 4000, 900
    floors = {f"roles__{role}__min_tokens": floor for role in ("generator", "verifier")}
    with FakeEndpoint(_honours_max_tokens) as fake:
        outcome = solve(fake, tmp_path, candidates=2, budget__total_tokens=total, **floors)
    state = state_of(outcome.run_dir)
    sent = _max_tokens_sent(outcome.run_dir)
    solve_calls = {k: v for k, v in sent.items() if k.startswith("L")}
    assert solve_calls and all(v >= floor for v in solve_calls.values()), solve_calls
    assert state.budget_exhausted.startswith("token budget")
    assert f"its floor of {floor} output tokens" in state.budget_exhausted
    assert _completed_usage(outcome.run_dir) <= total
    audit_ok(outcome.run_dir)
    # Without the floor the same budget starts calls with less than that.
    with FakeEndpoint(_honours_max_tokens) as fake:
        bare = solve(
            fake, tmp_path_factory.mktemp("bare"), candidates=2, budget__total_tokens=total
        )
    assert min(v for k, v in _max_tokens_sent(bare.run_dir).items() if k.startswith("L")) < floor
