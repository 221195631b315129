"""The search policy's settings (issue 19, Deliver 2), each against a scripted model at the
ModelClient seam: what each one changes in the calls made and the decisions taken."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from solver.errors import InputError
from solver.loop.policy import PolicyConfig, decide, verification_outcome
from solver.loop.state import (
    CallState,
    LineageState,
    RunState,
    VersionState,
    VersionStatus,
    confirmed_findings,
    reviews_of,
)
from solver.records import ProofFacts, VerificationFacts
from solver.report.search import load_search
from solver.roles.facts import Facts, NoFacts
from solver.roles.verifier import ProofFinding
from solver.testing import RecordedRequest
from solver.testing.fake_endpoint import Reply
from tests.loop import scripts
from tests.loop.harness import ScriptedEndpoint, audit_ok, solve, state_of


def _sceptic(request: RecordedRequest) -> bool:
    return "sceptical grader" in request.system_text  # the "adversarial" verifier variant


def sceptic_gives_no_verdict(request: RecordedRequest) -> Reply:
    if scripts.role_of(request) == "verifier" and _sceptic(request):
        return Reply(text="I have looked at it and have doubts.", chunk_chars=64)
    return scripts.solved(request)


def sceptic_finds_a_flaw(request: RecordedRequest) -> Reply:
    """v0 passes one of its two verifications; every revision is worse (fails both)."""
    role = scripts.role_of(request)
    if role == "generator":
        return scripts.proof_reply(scripts.GOOD_PROOF)
    if role == "reviser":
        return scripts.proof_reply(scripts.FLAWED_PROOF)
    if role == "verifier" and (_sceptic(request) or "FLAW" in request.user_text):
        return scripts.verdict([scripts.FLAW_FINDING])
    return scripts.fix_after_finding(request)


def _verifications(state: object, version: int) -> list[object]:
    calls = state.calls.values()  # type: ignore[attr-defined]
    return [c for c in calls if c.role == "verifier" and c.version == version]


def test_a_verification_without_verdict_is_issued_again(tmp_path: Path) -> None:
    with ScriptedEndpoint(sceptic_gives_no_verdict) as fake:
        outcome = solve(fake, tmp_path, candidates=1, acceptance__reverify_no_verdict=True)
    state = state_of(outcome.run_dir)
    assert outcome.outcome == "solved"
    ids = sorted(c.call_id for c in _verifications(state, 0))
    # verify.1 (adversarial) gave no verdict; verify.2 (next variant) replaced it
    assert ids == ["L0.v0.verify.0", "L0.v0.verify.1", "L0.v0.verify.2"]
    assert not state.calls["L0.v0.verify.1"].parsed_ok
    audit_ok(outcome.run_dir)


def test_without_reissue_no_verdict_fails_the_round(tmp_path: Path) -> None:
    with ScriptedEndpoint(sceptic_gives_no_verdict) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=1,
            acceptance__reverify_no_verdict=False,
            acceptance__max_failed_rounds=1,
            acceptance__max_lineages=1,
        )
    state = state_of(outcome.run_dir)
    assert state.lineages["L0"].versions[0].status == "failed"
    assert len(_verifications(state, 0)) == 2


def test_an_overturned_fail_is_replaced_not_counted_as_a_pass(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.reviewer_rejects) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=1,
            acceptance__overturned_fail_passes=False,
            acceptance__reverify_no_verdict=True,
            acceptance__max_failed_rounds=1,
            acceptance__max_lineages=1,
        )
    state = state_of(outcome.run_dir)
    assert outcome.outcome != "solved"  # one lenient reviewer passed nothing
    assert len(_verifications(state, 0)) == 4  # 2 x K verifications, each overturned


def test_staged_verification_stops_at_the_first_stage_on_a_fail(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.never_accepted) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=1,
            acceptance__verifications=5,
            acceptance__verify_stage=2,
            acceptance__cancel_on_blocking=True,
            acceptance__max_failed_rounds=2,
            acceptance__max_lineages=1,
            acceptance__abandon_on_recurring=False,
        )
    state = state_of(outcome.run_dir)
    assert len(_verifications(state, 0)) == 2
    assert len(_verifications(state, 1)) == 2
    audit_ok(outcome.run_dir)


def test_staged_verification_asks_the_rest_when_the_first_stage_passes(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.solved) as fake:
        outcome = solve(
            fake, tmp_path, candidates=1, acceptance__verifications=4, acceptance__verify_stage=1
        )
    state = state_of(outcome.run_dir)
    assert outcome.outcome == "solved"
    assert len(_verifications(state, 0)) == 4
    planned = [c for c in state.calls if c.startswith("L0.v0.verify.")]
    assert planned[0] == "L0.v0.verify.0"


def test_recurrence_must_span_consecutive_rounds_to_abandon(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    with ScriptedEndpoint(scripts.never_accepted) as fake:
        once = solve(
            fake,
            tmp_path / "one",
            candidates=1,
            acceptance__max_lineages=1,
            acceptance__recurrence_rounds=1,
        )
    with ScriptedEndpoint(scripts.never_accepted) as fake:
        twice = solve(
            fake,
            tmp_path / "two",
            candidates=1,
            acceptance__max_lineages=1,
            acceptance__recurrence_rounds=2,
        )
    first, second = state_of(once.run_dir).lineages["L0"], state_of(twice.run_dir).lineages["L0"]
    assert first.abandoned and second.abandoned
    assert max(first.versions) == 1  # abandoned when v1 repeated v0's flaw
    assert max(second.versions) == 2  # v0, v1 and v2 all had it
    audit_ok(twice.run_dir)


def test_a_lineage_revises_from_and_submits_its_best_version(tmp_path: Path) -> None:
    with ScriptedEndpoint(sceptic_finds_a_flaw) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=1,
            budget__calls=14,
            acceptance__best_version=True,
            acceptance__abandon_on_recurring=False,
        )
    state = state_of(outcome.run_dir)
    assert state.calls["L0.v1.revise"].target == "0"
    assert state.calls["L0.v2.revise"].target == "0"  # v1 passed nothing: back to v0
    assert state.selected == ("L0", 0)
    audit_ok(outcome.run_dir)


def test_lineages_follow_the_budget(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.unparseable) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=1,
            budget__calls=40,
            acceptance__max_failed_rounds=1,
            acceptance__lineages_follow_budget=True,
        )
    state = state_of(outcome.run_dir)
    assert len(state.lineages) > 3  # past the old cap of 3 x candidates
    assert state.budget_exhausted.startswith("call budget")


def test_temperature_zero_with_more_verifications_than_variants_is_refused(
    tmp_path: Path,
) -> None:
    with ScriptedEndpoint(scripts.solved) as fake, pytest.raises(InputError, match="byte for byte"):
        solve(
            fake,
            tmp_path,
            acceptance__verifications=5,
            **{"roles.verifier.temperature": 0.0},
        )
    # the checker's final round likewise (its default of 5 against 3 variants)
    checker = {"roles.checker.endpoint": "http://127.0.0.1:9/v1", "roles.checker.temperature": 0.0}
    with ScriptedEndpoint(scripts.solved) as fake, pytest.raises(InputError, match="checker"):
        solve(fake, tmp_path, acceptance__verifications=3, **checker)


def test_a_run_verifies_with_the_variants_it_names_in_their_order(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.solved) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=1,
            acceptance__verifications=3,
            **{"roles.verifier.variants": ["adversarial", "stepwise"]},
        )
    state = state_of(outcome.run_dir)
    verifications = sorted(
        (c for c in state.calls.values() if c.role == "verifier" and c.lineage == "L0"),
        key=lambda c: c.call_id,
    )
    assert [c.variant for c in verifications[:3]] == ["adversarial", "stepwise", "adversarial"]
    generators = {c.variant for c in state.calls.values() if c.role == "generator"}
    assert generators == {"direct"}  # the generator's stay as they ship
    audit_ok(outcome.run_dir)
    # one variant at temperature 0 leaves one distinct verification
    one = {"roles.verifier.variants": ["stepwise"], "roles.verifier.temperature": 0.0}
    with ScriptedEndpoint(scripts.solved) as fake, pytest.raises(InputError, match="only 1"):
        solve(fake, tmp_path, acceptance__verifications=2, **one)


@pytest.mark.parametrize(
    ("key", "names", "message"),
    [
        ("roles.verifier.variants", ["stepwise", "lenient"], "one of stepwise, adversarial"),
        ("roles.verifier.variants", ["stepwise", "stepwise"], "named once"),
        ("roles.grader.variants", ["standard"], "only generator and verifier"),
    ],
)
def test_a_variant_choice_the_roles_cannot_take_is_refused(
    tmp_path: Path, key: str, names: list[str], message: str
) -> None:
    with ScriptedEndpoint(scripts.solved) as fake, pytest.raises(InputError, match=message):
        solve(fake, tmp_path, **{key: names})
    assert not any(tmp_path.rglob("journal.jsonl"))  # refused before the run was written


def reviser_comments(request: RecordedRequest) -> Reply:
    if scripts.role_of(request) == "reviser":
        return scripts.proof_reply("Fixing C1: " + scripts.GOOD_PROOF)
    return scripts.fix_after_finding(request)


def test_a_revision_that_talks_about_findings_is_unusable(tmp_path: Path) -> None:
    with ScriptedEndpoint(reviser_comments) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=1,
            acceptance__max_failed_rounds=2,
            acceptance__max_lineages=1,
        )
    state = state_of(outcome.run_dir)
    revise = state.calls["L0.v1.revise"]
    assert isinstance(revise.facts, ProofFacts)
    assert revise.facts.has_proof is False and revise.facts.commentary == "Fixing C1"
    assert state.lineages["L0"].versions[1].proof_artifact is None
    verified = {c.version for c in state.calls.values() if c.role == "verifier"}
    assert 1 not in verified  # no verifier saw the commentary
    audit_ok(outcome.run_dir)


Verdict = Literal["pass", "fail"]


def _call(
    call_id: str, role: str, lineage: str, version: int, facts: Facts | None = None
) -> CallState:
    return CallState(
        call_id=call_id,
        role=role,
        variant="default",
        phase="solve",
        lineage=lineage,
        version=version,
        target=None,
        evaluation=False,
        status="completed",
        parsed_ok=True,
        facts=facts or NoFacts(),
    )


def _lineage(
    state: RunState,
    index: int,
    status: VersionStatus,
    verdicts: tuple[Verdict, ...],
    answer: str | None = None,
) -> None:
    """Lineage L<index> with one version in ``status`` and completed verifications."""
    name = f"L{index}"
    version = VersionState(name, 0, f"{name}.v0.generate", None, proof_artifact=f"{name}-proof")
    version.status = status
    state.lineages[name] = LineageState(name, index, versions={0: version})
    if status == "accepted":
        state.lineages[name].accepted_version = 0
    proof = ProofFacts(has_proof=True, final_answer=answer)
    state.calls[version.producer] = _call(version.producer, "generator", name, 0, proof)
    for n, verdict in enumerate(verdicts):
        facts = VerificationFacts(verdict=verdict, findings=())
        call_id = f"{name}.v0.verify.{n}"
        state.calls[call_id] = _call(call_id, "verifier", name, 0, facts=facts)


def _stepping_lineages(focus: int) -> set[str | None]:
    state = RunState()
    _lineage(state, 0, "accepted", ("pass",) * 5)
    _lineage(state, 1, "failed", ("pass", "fail"))  # best pass rate among the failed: 1/2
    _lineage(state, 2, "open", ("pass", "pass"))  # its stage passed: furthest along
    _lineage(state, 3, "failed", ("fail",))
    cfg = PolicyConfig(candidates=4, verify_stage=2, focus_after_accept=focus)
    step = decide(state, cfg, elapsed_s=0.0)
    assert step.calls and not step.decisions
    return {c.lineage for c in step.calls}


def test_after_an_acceptance_only_the_lineages_furthest_along_step() -> None:
    assert _stepping_lineages(0) == {"L1", "L2", "L3"}
    assert _stepping_lineages(1) == {"L2"}  # the rest of its round: 3 more verifications
    assert _stepping_lineages(2) == {"L1", "L2"}  # and the better failed lineage's next proof


def test_before_any_acceptance_every_lineage_steps() -> None:
    state = RunState()
    _lineage(state, 0, "open", ("pass", "pass"))
    _lineage(state, 1, "failed", ("fail",))
    step = decide(state, PolicyConfig(candidates=2, verify_stage=2, focus_after_accept=1), 0.0)
    assert {c.lineage for c in step.calls} == {"L0", "L1"}


def _started(state: RunState, start: int) -> list[str]:
    cfg = PolicyConfig(candidates=4, verify_stage=2, start_lineages=start)
    step = decide(state, cfg, elapsed_s=0.0)
    return sorted(c.call_id for c in step.calls if c.role == "generator")


def test_start_lineages_widen_to_the_candidates_once_a_round_fails() -> None:
    assert _started(RunState(), 0) == [f"L{i}.v0.generate" for i in range(4)]
    assert _started(RunState(), 2) == ["L0.v0.generate", "L1.v0.generate"]
    passing = RunState()
    _lineage(passing, 0, "open", ("pass", "pass"))
    _lineage(passing, 1, "open", ("pass",))
    assert _started(passing, 2) == []  # both first proofs still pass: no third lineage
    failing = RunState()
    _lineage(failing, 0, "open", ("pass", "pass"))
    _lineage(failing, 1, "failed", ("fail",))
    assert _started(failing, 2) == ["L1.v1.generate", "L2.v0.generate", "L3.v0.generate"]


def test_one_start_lineage_goes_on_past_an_acceptance() -> None:
    state = RunState()
    _lineage(state, 0, "accepted", ("pass",) * 5)
    assert _started(state, 1) == ["L1.v0.generate"]  # two are needed: the search goes on


def _agreed_step(answers: tuple[str, ...]) -> tuple[set[str | None], list[tuple[str, str]]]:
    """With these accepted proofs' answers: the lineages still called, and the decisions."""
    state = RunState()
    for index, answer in enumerate(answers):
        _lineage(state, index, "accepted", ("pass",) * 5, answer)
    _lineage(state, len(answers), "failed", ("fail",))
    cfg = PolicyConfig(candidates=4, verify_stage=2, answers_agree=True, recheck_answers=False)
    step = decide(state, cfg, elapsed_s=0.0)
    return {c.lineage for c in step.calls}, [(d.kind, d.lineage or "") for d in step.decisions]


def test_with_answers_agree_two_accepted_proofs_of_different_answers_do_not_stop_the_run() -> None:
    called, decisions = _agreed_step(("7", "8"))
    assert decisions == [] and called == {"L2", "L3"}  # the search goes on
    called, decisions = _agreed_step(("7", "8", "7"))
    # two agree: the run leaves the solve phase, and the outvoted proof is no longer accepted
    assert ("unaccepted", "L1") in decisions and ("phase", "") in decisions
    assert not any(lineage in ("L0", "L2") for kind, lineage in decisions if kind == "unaccepted")
    called, decisions = _agreed_step(("7", "7"))
    assert decisions == [("phase", "")]


def reported_flaw_then_fixed(request: RecordedRequest) -> Reply:
    """The first proof has a flaw every verifier reports; any reviewer would reject it (so a
    run with reviews never revises); the reviser's proof passes."""
    role = scripts.role_of(request)
    if role == "reviewer":
        return scripts.reviewer_rejects(request)
    return scripts.fix_after_finding(request)


def test_without_reviews_a_reported_finding_fails_the_round_and_goes_to_the_reviser(
    tmp_path: Path,
) -> None:
    with ScriptedEndpoint(reported_flaw_then_fixed) as fake:
        outcome = solve(
            fake, tmp_path, candidates=1, acceptance__review=False, acceptance__verify_stage=1
        )
    state = state_of(outcome.run_dir)
    assert outcome.outcome == "solved"
    assert not [c for c in state.calls.values() if c.role == "reviewer"]
    assert state.lineages["L0"].versions[0].status == "failed"
    revision = state.calls["L0.v1.revise"]
    assert revision.variant == "unreviewed"
    (prompt,) = [r for r in fake.requests if scripts.role_of(r) == "reviser"]
    assert "Nobody has checked the report" in prompt.system_text
    assert "# Reported findings" in prompt.user_text
    assert scripts.FLAW_FINDING["explanation"] in prompt.user_text
    audit_ok(outcome.run_dir)  # the audit derives the reviser's findings without reviews
    search = load_search(outcome.run_dir)  # what the report and the progress view say
    assert search is not None and "no reviewer" in search.settings_text()


def test_with_reviews_the_same_finding_is_overturned_and_never_revised(tmp_path: Path) -> None:
    with ScriptedEndpoint(reported_flaw_then_fixed) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=1,
            acceptance__verify_stage=1,
            acceptance__max_failed_rounds=1,
            acceptance__max_lineages=1,
        )
    state = state_of(outcome.run_dir)
    assert [c for c in state.calls.values() if c.role == "reviewer"]
    assert "L0.v1.revise" not in state.calls


def _one_report(verdict: Literal["pass", "fail"], severity: str) -> tuple[RunState, CallState]:
    finding = ProofFinding(id="F1", location="step 2", severity=severity, explanation="gap")
    state = RunState(reviews=False)
    _lineage(state, 0, "open", ())
    call = _call(
        "L0.v0.verify.0",
        "verifier",
        "L0",
        0,
        facts=VerificationFacts(verdict=verdict, findings=(finding,)),
    )
    state.calls[call.call_id] = call
    return state, call


@pytest.mark.parametrize(
    ("verdict", "severity", "outcome", "shown"),
    [
        ("pass", "major", "fail", 1),  # a blocking finding fails a "pass" as it stands
        ("pass", "minor", "pass", 0),  # a passing report's remark is not a finding to fix
        ("fail", "minor", "fail", 1),
    ],
)
def test_without_reviews_findings_stand_as_reported(
    verdict: Literal["pass", "fail"], severity: str, outcome: str, shown: int
) -> None:
    state, call = _one_report(verdict, severity)
    cfg = PolicyConfig(candidates=1, review=False)
    assert verification_outcome(state, call, cfg) == outcome
    assert len(confirmed_findings(state, "L0", 0)) == shown
    # with reviews the same report waits for its review, and no finding stands before it
    state.reviews = True
    assert verification_outcome(state, call, PolicyConfig(candidates=1)) == "pending"
    assert confirmed_findings(state, "L0", 0) == []


def test_a_run_reads_whether_it_reviews_from_its_manifest() -> None:
    assert reviews_of({"acceptance": {"review": False}}) is False
    assert reviews_of({"acceptance": {"review": True}}) is True
    # a run from before the setting, or a damaged value, reads as reviewed
    assert reviews_of({"acceptance": {}}) is True
    assert reviews_of({"acceptance": {"review": "no"}}) is True
    assert reviews_of(None) is True


def test_recombination_without_reviews_is_refused(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.solved) as fake, pytest.raises(InputError, match="review"):
        solve(fake, tmp_path, acceptance__review=False, acceptance__recombine=2)


def test_refining_from_the_pool_revises_the_best_proof_of_any_lineage(tmp_path: Path) -> None:
    """Both first proofs fail alike; the older is the pool's best, so both lineages revise it
    (the younger naming it by lineage), and the audit derives what each reviser was shown."""
    with ScriptedEndpoint(scripts.fix_after_finding) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=2,
            acceptance__refine_from_pool=True,
            acceptance__verify_stage=1,
        )
    state = state_of(outcome.run_dir)
    assert outcome.outcome == "solved"
    assert state.calls["L0.v1.revise"].target == "0"
    assert state.calls["L1.v1.revise"].target == "L0.v0"
    younger = [r for r in fake.requests if scripts.role_of(r) == "reviser"]
    assert len(younger) == 2 and younger[0].user_text == younger[1].user_text  # one source
    audit_ok(outcome.run_dir)


def test_without_refining_from_the_pool_a_lineage_revises_its_own_proof(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.fix_after_finding) as fake:
        outcome = solve(fake, tmp_path, candidates=2, acceptance__verify_stage=1)
    state = state_of(outcome.run_dir)
    assert state.calls["L1.v1.revise"].target == "0"


def _end_of(state: RunState) -> tuple[str, str]:
    from solver.loop.policy import _finish  # the outcome rule itself, on a built state

    end = _finish(state, ("L0", 0), "selected")
    return end.outcome, end.reason


def test_accepted_proofs_that_disagree_on_the_answer_are_not_claimed_solved() -> None:
    agreeing = RunState()
    for index in range(2):
        _lineage(agreeing, index, "accepted", ("pass",) * 5, "7")
    assert _end_of(agreeing) == ("solved", "selected")
    disputed = RunState()
    for index, answer in enumerate(("7", "8")):
        _lineage(disputed, index, "accepted", ("pass",) * 5, answer)
    outcome, reason = _end_of(disputed)
    assert outcome == "partial"  # ungraded: a proof, not a claim
    assert "not claimed solved: the accepted proofs state different final answers (7, 8)" in reason


def test_an_accepted_proof_with_a_blocking_finding_left_open_is_not_claimed_solved() -> None:
    state = RunState(reviews=False)  # its findings stand as the verifier reported them
    _lineage(state, 0, "accepted", ("pass",) * 5)
    finding = ProofFinding(id="F1", location="Step 2", severity="major", explanation="a gap")
    facts = VerificationFacts(verdict="fail", findings=(finding,))
    state.calls["L0.v0.verify.5"] = _call("L0.v0.verify.5", "verifier", "L0", 0, facts=facts)
    outcome, reason = _end_of(state)
    assert outcome == "partial"
    assert "1 blocking finding(s) of its verifications stand unresolved" in reason
    minor = finding.model_copy(update={"severity": "minor"})
    facts = VerificationFacts(verdict="pass", findings=(minor,))
    state.calls["L0.v0.verify.5"] = _call("L0.v0.verify.5", "verifier", "L0", 0, facts=facts)
    assert _end_of(state)[0] == "solved"  # a minor remark blocks nothing


def test_fill_starts_lineages_beyond_the_candidates_while_slots_are_idle() -> None:
    assert len(_filled(0)) == 2
    assert _filled(6) == [f"L{i}.v0.generate" for i in range(6)]
    busy = RunState()
    _lineage(busy, 0, "open", ())
    for n in range(5):  # five verifications of L0 in flight
        call_id = f"L0.v0.verify.{n}"
        busy.calls[call_id] = _call(call_id, "verifier", "L0", 0)
        busy.calls[call_id].status = "planned"
    step = decide(busy, PolicyConfig(candidates=1, verify_stage=0, fill=6), 0.0)
    assert [c.call_id for c in step.calls] == ["L1.v0.generate"]  # one slot left idle


def _filled(fill: int) -> list[str]:
    step = decide(RunState(), PolicyConfig(candidates=2, fill=fill), elapsed_s=0.0)
    return sorted(c.call_id for c in step.calls)
