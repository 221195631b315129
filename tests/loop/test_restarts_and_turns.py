"""Issue 19 points 1, 8 and 10 against scripted models: the generator's self-improvement turn,
restarts from the pool's best proof, and recombination of proofs of different lineages."""

from __future__ import annotations

import json
from pathlib import Path

from solver.records import ProofFacts
from solver.store import RunReader
from solver.testing import RecordedRequest
from solver.testing.fake_endpoint import Reply
from tests.loop import scripts
from tests.loop.harness import ScriptedEndpoint, audit_ok, solve, state_of


def _is_second_turn(request: RecordedRequest) -> bool:
    return bool(request.text_of_role("assistant"))


def improves_itself(request: RecordedRequest) -> Reply:
    """The first answer has a flaw verifiers find; the second turn on it fixes the flaw."""
    if scripts.role_of(request) == "generator" and _is_second_turn(request):
        return scripts.proof_reply(scripts.GOOD_PROOF)
    return scripts.fix_after_finding(request)


def improves_with_commentary(request: RecordedRequest) -> Reply:
    """The second turn talks about the first answer inside its proof."""
    if scripts.role_of(request) == "generator" and _is_second_turn(request):
        return scripts.proof_reply("Unlike my first attempt, we argue mod 4. " + scripts.GOOD_PROOF)
    return scripts.fix_after_finding(request)


def _messages(run_dir: Path, call_id: str) -> list[list[str]]:
    reader = RunReader(run_dir)
    for rec in reader.records():
        if rec.type == "context.built" and rec.data["call_id"] == call_id:
            return list(json.loads(reader.read_blob(rec.data["messages"]["blob"])))
    raise AssertionError(f"no context for {call_id}")


def test_a_fresh_proof_gets_a_second_turn_before_verification(tmp_path: Path) -> None:
    with ScriptedEndpoint(improves_itself) as fake:
        outcome = solve(fake, tmp_path, candidates=1, acceptance__self_improve=True)
    state = state_of(outcome.run_dir)
    assert outcome.outcome == "solved"
    improve = state.calls["L0.v1.improve"]
    assert (improve.role, improve.target, improve.variant) == ("generator:improve", "0", "direct")
    assert not [c for c in state.calls.values() if c.version == 0 and c.role == "verifier"]
    assert not [c for c in state.calls.values() if c.role == "reviser"]
    assert state.lineages["L0"].accepted_version == 1
    messages = _messages(outcome.run_dir, "L0.v1.improve")
    first = _messages(outcome.run_dir, "L0.v0.generate")
    assert [m[0] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[:2] == first  # the same conversation, continued
    proof = RunReader(outcome.run_dir).read_blob(state.artifacts["L0.v0.proof"].blob).decode()
    assert messages[2][1] == proof + "\n"  # its own proof, as other roles would see it
    assert "improve your solution" in messages[3][1]
    audit_ok(outcome.run_dir)


def test_without_the_setting_the_first_proof_is_verified(tmp_path: Path) -> None:
    with ScriptedEndpoint(improves_itself) as fake:
        outcome = solve(fake, tmp_path, candidates=1, acceptance__self_improve=False)
    state = state_of(outcome.run_dir)
    assert not [c for c in state.calls.values() if c.role == "generator:improve"]
    assert [c for c in state.calls.values() if c.version == 0 and c.role == "verifier"]
    assert "L0.v1.revise" in state.calls


def test_a_second_turn_that_talks_about_the_first_is_unusable(tmp_path: Path) -> None:
    with ScriptedEndpoint(improves_with_commentary) as fake:
        outcome = solve(
            fake, tmp_path, candidates=1, budget__calls=12, acceptance__self_improve=True
        )
    state = state_of(outcome.run_dir)
    facts = state.calls["L0.v1.improve"].facts
    assert isinstance(facts, ProofFacts) and not facts.has_proof
    assert facts.commentary is not None and "first attempt" in facts.commentary
    assert state.lineages["L0"].versions[1].proof_artifact is None
    assert "L0.v2.generate" in state.calls  # the lineage starts again from scratch
    audit_ok(outcome.run_dir)


def test_a_restart_revises_the_best_proof_of_an_abandoned_lineage(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.never_accepted) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=1,
            budget__calls=16,
            acceptance__max_failed_rounds=1,
            acceptance__restart_from_pool=True,
        )
    state = state_of(outcome.run_dir)
    seed = state.calls["L1.v0.revise"]
    assert (seed.role, seed.target) == ("reviser", "L0.v0")
    assert state.lineages["L1"].versions[0].parent is None  # a new lineage
    assert "L2.v0.generate" in state.calls  # the next restart starts from scratch
    reader = RunReader(outcome.run_dir)
    findings = reader.read_blob(state.artifacts["L1.v0.revise.findings"].blob).decode()
    assert "assumes a equals b" in findings  # L0 v0's confirmed finding
    audit_ok(outcome.run_dir)


def test_restarts_without_the_setting_start_from_scratch(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.never_accepted) as fake:
        outcome = solve(
            fake, tmp_path, candidates=1, budget__calls=12, acceptance__max_failed_rounds=1
        )
    state = state_of(outcome.run_dir)
    assert "L1.v0.generate" in state.calls
    assert not [c for c in state.calls.values() if c.call_id.endswith(".v0.revise")]


def recombined_is_correct(request: RecordedRequest) -> Reply:
    if scripts.role_of(request) == "recombiner":
        return scripts.proof_reply(scripts.GOOD_PROOF)
    return (
        scripts.fix_after_finding(request)
        if "FLAW" not in request.user_text
        else (scripts.never_accepted(request))
    )


def test_a_restart_recombines_the_best_proofs_of_other_lineages(tmp_path: Path) -> None:
    with ScriptedEndpoint(recombined_is_correct) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=2,
            acceptance__accepted_needed=1,
            acceptance__max_failed_rounds=1,
            acceptance__recombine=3,
            budget__calls=40,
        )
    state = state_of(outcome.run_dir)
    call = state.calls["L2.v0.recombine"]
    assert call.role == "reviser:recombine"
    assert sorted(call.target.split(",")) == ["L0.v0", "L1.v0"]  # type: ignore[union-attr]
    pool = json.loads(
        RunReader(outcome.run_dir).read_blob(state.artifacts["L2.v0.recombine.pool"].blob)
    )
    assert len(pool) == 2 and all("assumes a equals b" in entry for entry in pool)
    assert outcome.outcome == "solved" and state.lineages["L2"].accepted_version == 0
    audit_ok(outcome.run_dir)
