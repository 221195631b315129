"""The token budget's reservations (solver.loop.budget): a call holds its role's expected
length, not its full max_tokens, and the budget is never exceeded whatever the calls in
flight write, in whatever order they end."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from solver.loop.budget import MARGIN, PRIOR_CALLS, Reservations, expected_cap
from solver.store import RunReader
from solver.testing import FakeEndpoint
from tests.loop.harness import audit_ok, solve, state_of
from tests.loop.test_budgets import _completed_usage, _honours_max_tokens, _max_tokens_sent


def test_a_role_is_capped_by_its_own_lengths_once_it_has_some() -> None:
    assert expected_cap([], 256_000, 90_000) == 90_000  # the prior: the lineage's share
    assert expected_cap([10] * (PRIOR_CALLS - 1), 256_000, 300_000) == 256_000
    seen = [1000, 4000, 2500, 3000]
    assert expected_cap(seen, 256_000, 10) == int(MARGIN * 4000)
    assert expected_cap(seen, 5000, 10) == 5000  # never above the role's max_tokens


@st.composite
def _runs(draw: st.DrawFn) -> tuple[int, int, list[tuple[int, int, int]], list[int]]:
    """A budget, a number of slots, calls (role, true output length, prompt estimate) in the
    order the policy plans them, and which call in flight ends at each step."""
    total = draw(st.integers(1_000, 400_000))
    slots = draw(st.integers(1, 48))
    calls = draw(
        st.lists(
            st.tuples(st.integers(0, 3), st.integers(1, 120_000), st.integers(1, 8_000)),
            min_size=1,
            max_size=120,
        )
    )
    ends = draw(st.lists(st.integers(0, 1_000), min_size=len(calls), max_size=len(calls)))
    return total, slots, calls, ends


@settings(max_examples=300, deadline=None)
@given(_runs(), st.integers(1, 256_000), st.integers(0, 100))
def test_spent_and_promised_never_exceed_the_budget(
    run: tuple[int, int, list[tuple[int, int, int]], list[int]], max_tokens: int, used_in: int
) -> None:
    """The engine's admission rule (Engine._token_cap) driven through random runs: a call
    starts only with an output cap of at least 1 beside the promises of the calls in flight,
    the server writes at most that cap, and a prompt takes at most its estimate (``used_in``
    percent of it). At every step the tokens spent plus those promised fit in the budget."""
    total, slots, calls, ends = run
    reserved = Reservations(total)
    spent = 0
    lengths: dict[int, list[int]] = {}
    flying: dict[str, tuple[int, int, int, int]] = {}  # id: role, length, estimate, cap
    pending = list(enumerate(calls))
    for end in ends:
        while pending and len(flying) < slots:
            index, (role, length, estimate) = pending[0]
            left = total - spent
            share = left // 2 - estimate
            wanted = expected_cap(lengths.get(role, []), max_tokens, share)
            cap = reserved.cap(spent, estimate, wanted)
            if cap < 1 and not reserved.promised:
                cap = left - estimate
            if cap < 1:
                break  # waits for a promise to be released, or the budget has ended
            pending.pop(0)
            cap = min(max_tokens, cap)
            reserved.promise(str(index), estimate, cap)
            flying[str(index)] = (role, length, estimate, cap)
            assert spent + reserved.held() <= total
        if not flying:
            break
        call_id = sorted(flying)[end % len(flying)]
        role, length, estimate, cap = flying.pop(call_id)
        wrote = min(length, cap)  # the server stops at max_tokens
        spent += estimate * used_in // 100 + wrote
        lengths.setdefault(role, []).append(wrote)
        reserved.settle(call_id)
        assert spent + reserved.held() <= total
    assert spent <= total


def test_later_calls_hold_their_roles_expected_length(tmp_path: Path) -> None:
    """A real run: once verifiers have answered, a verification is sent 1.5 x the longest
    verifier output so far, far below the role's max_tokens, and the calls that completed
    spent no more than the budget."""
    total = 60_000
    with FakeEndpoint(_honours_max_tokens) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=2,
            concurrency=8,
            budget__total_tokens=total,
            roles__verifier__max_tokens=50_000,
        )
    state = state_of(outcome.run_dir)
    sent = _max_tokens_sent(outcome.run_dir)
    later = []  # verifications started after PRIOR_CALLS verifications had completed
    ended = 0
    for rec in RunReader(outcome.run_dir).records():
        call = state.calls.get(str(rec.data.get("call_id")))
        if call is None or call.role != "verifier":
            continue
        if rec.type == "call.completed":
            ended += 1
        elif rec.type == "llm.started" and ended >= PRIOR_CALLS:
            later.append(call.call_id)
    assert later
    longest = max(c.output_tokens for c in state.calls.values() if c.role == "verifier")
    assert all(sent[c] <= MARGIN * longest + 1 for c in later)
    assert all(sent[c] < 50_000 for c in later)
    assert _completed_usage(outcome.run_dir) <= total
    audit_ok(outcome.run_dir)


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.integers(2_000, 40_000), st.integers(1, 3), st.integers(1, 8))
def test_real_runs_never_spend_more_than_the_budget(
    tmp_path: Path, total: int, candidates: int, concurrency: int
) -> None:
    with FakeEndpoint(_honours_max_tokens) as fake:
        outcome = solve(
            fake,
            Path(tempfile.mkdtemp(dir=tmp_path)),  # hypothesis may repeat an example
            candidates=candidates,
            concurrency=concurrency,
            budget__total_tokens=total,
        )
    # the solve calls' (grading after the search is not bounded by the budget)
    assert _completed_usage(outcome.run_dir) <= total
