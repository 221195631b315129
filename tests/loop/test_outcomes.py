"""The loop against scripted models: each kind of run ends as it should. The wire is not the
subject here, so most run at the ModelClient seam (ScriptedEndpoint); the parallel one keeps
the real HTTP fake, where concurrency is on real sockets."""

from __future__ import annotations

from pathlib import Path

from solver.problems import load_problem
from solver.testing import FakeEndpoint
from tests.loop import scripts
from tests.loop.harness import (
    ScriptedEndpoint,
    audit_ok,
    max_in_flight,
    result_of,
    solve,
    state_of,
    write_problem,
)


def test_solved_when_k_verifications_pass(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.solved) as fake:
        outcome = solve(fake, tmp_path, acceptance__verifications=3)
    result = result_of(outcome.run_dir)
    assert outcome.outcome == "solved"
    assert result["selected"]["accepted"] is True
    state = state_of(outcome.run_dir)
    accepted = state.accepted()[0]
    verifications = [
        c for c in state.calls.values() if c.role == "verifier" and c.lineage == accepted.lineage
    ]
    assert len(verifications) == 3
    assert all(c.facts.verdict == "pass" for c in verifications)
    page = (outcome.run_dir / "final" / "proof.md").read_text()
    head, _, proof = page.partition("\n---\n\n")
    assert head.startswith("# Proof: ") and "**Accepted.**" in head and "NOT" not in head
    assert "## Problem\n\n" + load_problem(write_problem(tmp_path)).statement in head
    assert proof.startswith("## Proof")
    # The scripted proof answers "Not applicable" where the problem's answer is 2.
    assert result["answer_check"]["verdict"] in ("not_equivalent", "undecided")
    audit_ok(outcome.run_dir)


def test_confirmed_finding_is_revised_and_fixed(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.fix_after_finding) as fake:
        outcome = solve(fake, tmp_path, candidates=1)
    state = state_of(outcome.run_dir)
    lineage = state.lineages["L0"]
    assert outcome.outcome == "solved"
    assert lineage.accepted_version == 1
    assert lineage.versions[0].status == "failed"
    assert state.calls["L0.v1.revise"].status == "completed"
    reviser_requests = [r for r in fake.requests if scripts.role_of(r) == "reviser"]
    assert len(reviser_requests) == 1
    assert "assumes a equals b" in reviser_requests[0].user_text
    assert "FLAW" not in (outcome.run_dir / "final" / "proof.md").read_text()
    audit_ok(outcome.run_dir)


def test_rejected_findings_do_not_block_acceptance(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.reviewer_rejects) as fake:
        # the setting that lets one reviewer pass a proof (off by default: see
        # test_search_policy.test_an_overturned_fail_is_replaced_not_counted_as_a_pass)
        outcome = solve(fake, tmp_path, candidates=1, acceptance__overturned_fail_passes=True)
    state = state_of(outcome.run_dir)
    assert outcome.outcome == "solved"
    reviews = [c for c in state.calls.values() if c.role == "reviewer"]
    assert reviews and all(c.facts.confirmed == [] for c in reviews)
    assert not any(c.role == "reviser" for c in state.calls.values())
    audit_ok(outcome.run_dir)


def test_call_budget_ends_in_partial(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.never_accepted) as fake:
        outcome = solve(
            fake, tmp_path, candidates=1, budget__calls=7, acceptance__abandon_on_recurring=False
        )
    result = result_of(outcome.run_dir)
    state = state_of(outcome.run_dir)
    assert state.budget_exhausted.startswith("call budget")
    assert state.solve_calls() <= 7
    assert outcome.outcome == "partial"
    assert result["score"] == 2
    assert result["budget_exhausted"]
    # the best attempt was never accepted: the first lines of proof.md say so plainly
    page = (outcome.run_dir / "final" / "proof.md").read_text()
    assert result["selected"]["accepted"] is False
    assert page.splitlines()[2].startswith("**NOT ACCEPTED. This proof did not pass")
    assert "outcome: partial" in page.splitlines()[2] and "grader: 2/7" in page
    audit_ok(outcome.run_dir)


def test_recurring_finding_abandons_lineage(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.never_accepted) as fake:
        outcome = solve(fake, tmp_path, candidates=1, acceptance__max_lineages=1)
    state = state_of(outcome.run_dir)
    lineage = state.lineages["L0"]
    assert lineage.abandoned and "recurred" in lineage.abandon_reason
    assert outcome.outcome == "partial"
    audit_ok(outcome.run_dir)


def test_unparseable_output_everywhere_is_conservative(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.unparseable) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=1,
            acceptance__max_failed_rounds=2,
            acceptance__max_lineages=1,
        )
    state = state_of(outcome.run_dir)
    verifiers = [c for c in state.calls.values() if c.role == "verifier"]
    assert verifiers and all(not c.parsed_ok and c.facts.verdict == "fail" for c in verifiers)
    graders = [c for c in state.calls.values() if c.role == "grader"]
    # A grader with no readable grade leaves the proof ungraded: no score, not a 0.
    assert graders and all(c.facts.score is None for c in graders)
    assert result_of(outcome.run_dir)["score"] is None
    assert outcome.outcome == "unsolved"
    assert state.lineages["L0"].abandoned
    audit_ok(outcome.run_dir)


def test_truncated_responses_are_never_verified(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.truncated) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=2,
            acceptance__max_failed_rounds=2,
            acceptance__max_lineages=2,
        )
    state = state_of(outcome.run_dir)
    generators = [c for c in state.calls.values() if c.role == "generator"]
    assert generators and all(c.truncated for c in generators)
    assert not any(c.role in ("verifier", "grader") for c in state.calls.values())
    assert outcome.outcome == "unsolved"
    result = result_of(outcome.run_dir)
    assert result["calls"]["truncated"] == len(generators)
    audit_ok(outcome.run_dir)


def test_many_candidates_in_parallel(tmp_path: Path) -> None:
    with FakeEndpoint(scripts.slow_solved) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=8,
            concurrency=16,
            acceptance__accepted_needed=8,
            acceptance__verifications=2,
        )
    state = state_of(outcome.run_dir)
    assert outcome.outcome == "solved"
    assert len(state.accepted()) == 8
    assert state.calls["select"].status == "completed"
    assert max_in_flight(outcome.run_dir) > 1
    audit_ok(outcome.run_dir)
