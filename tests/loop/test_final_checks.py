"""Issue 19 points 4 and 9 against a scripted model at the ModelClient seam: the final round
of verification, the re-examination of accepted proofs with different answers, several grades
per final proof, and selection by a pairwise bracket with its tie and fallback rules."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from solver.answers import answer_key
from solver.loop.policy import grade_of
from solver.loop.state import RunState, pair_of
from solver.records import SelectionFacts
from solver.store import RunReader
from solver.testing import RecordedRequest
from solver.testing.fake_endpoint import Reply
from tests.loop import scripts
from tests.loop.harness import ScriptedEndpoint, audit_ok, result_of, solve, state_of

Responder = Callable[[RecordedRequest], Reply]


def _decisions(run_dir: Path) -> list[tuple[str, str, int | None, str]]:
    return [
        (r.data["kind"], r.data.get("lineage") or "", r.data.get("version"), r.data["reason"])
        for r in RunReader(run_dir).records()
        if r.type == "decision"
    ]


def _ids(state: RunState, part: str) -> list[str]:
    return sorted(c for c in state.calls if part in c)


def _lineage_of_generator(request: RecordedRequest) -> int:
    """Which lineage a generator call is for, by its variant (L0 direct, L1 explore-cases,
    L2 invariant-first at version 0)."""
    system = request.system_text
    return 1 if "Begin by exploring" in system else 2 if "Before committing" in system else 0


class Counting:
    """Counts verifications per proof marker: later checks of a proof can then fail while
    its first round passed (a flaw that more verifications find)."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}
        self.lock = threading.Lock()

    def nth(self, key: str) -> int:
        with self.lock:
            self.seen[key] = self.seen.get(key, 0) + 1
            return self.seen[key]


def flaw_found_late(passes: int) -> Responder:
    """The first proof passes its first ``passes`` verifications, then every one finds its
    flaw (confirmed on review); the revision is sound."""
    counts = Counting()

    def responder(request: RecordedRequest) -> Reply:
        role = scripts.role_of(request)
        if role == "generator":
            return scripts.proof_reply(scripts.FLAWED_PROOF)
        if role == "reviser":
            return scripts.proof_reply(scripts.GOOD_PROOF)
        if role == "verifier" and "FLAW" in request.user_text:
            if counts.nth("flawed") > passes:
                return scripts.verdict([scripts.FLAW_FINDING])
            return scripts.verdict([])
        return scripts.solved(request)

    return responder


# ---------------------------------------------------------------- the final round


def test_an_accepted_proof_gets_a_final_round_before_the_run_stops(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.solved) as fake:
        outcome = solve(fake, tmp_path, candidates=1, acceptance__final_verifications=3)
    state = state_of(outcome.run_dir)
    assert outcome.outcome == "solved"
    assert _ids(state, ".final.") == ["L0.v0.final.0", "L0.v0.final.1", "L0.v0.final.2"]
    kinds = [d[0] for d in _decisions(outcome.run_dir)]
    assert kinds.index("accepted") < kinds.index("final_passed") < kinds.index("phase")
    assert state.lineages["L0"].versions[0].checks == {"final"}
    audit_ok(outcome.run_dir)


def test_without_a_final_round_none_is_made(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.solved) as fake:
        outcome = solve(fake, tmp_path, candidates=1, acceptance__final_verifications=0)
    state = state_of(outcome.run_dir)
    assert outcome.outcome == "solved"
    assert not _ids(state, ".final.")
    assert "final_passed" not in [d[0] for d in _decisions(outcome.run_dir)]


def test_a_proof_that_fails_its_final_round_is_no_longer_accepted_and_is_revised(
    tmp_path: Path,
) -> None:
    with ScriptedEndpoint(flaw_found_late(passes=2)) as fake:
        outcome = solve(fake, tmp_path, candidates=1, acceptance__final_verifications=3)
    state = state_of(outcome.run_dir)
    unaccepted = [d for d in _decisions(outcome.run_dir) if d[0] == "unaccepted"]
    assert [(d[1], d[2]) for d in unaccepted] == [("L0", 0)]
    assert re.fullmatch(r"final round: 0/[1-3] verifications passed", unaccepted[0][3])
    assert state.lineages["L0"].versions[0].status == "failed"
    # The reviser was asked to fix what the final round found, from that version.
    assert state.calls["L0.v1.revise"].target == "0"
    assert state.lineages["L0"].accepted_version == 1
    assert state.lineages["L0"].versions[1].checks == {"final"}
    assert outcome.outcome == "solved" and state.selected == ("L0", 1)
    audit_ok(outcome.run_dir)


def test_a_final_round_that_cannot_finish_leaves_the_proof_unaccepted(tmp_path: Path) -> None:
    # generate + 2 verifications accept; the call budget leaves room for one final call only
    with ScriptedEndpoint(scripts.solved) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=1,
            acceptance__final_verifications=3,
            budget__calls=4,
        )
    state = state_of(outcome.run_dir)
    assert _ids(state, ".final.") == ["L0.v0.final.0"]
    unaccepted = [d for d in _decisions(outcome.run_dir) if d[0] == "unaccepted"]
    assert [d[3] for d in unaccepted] == [
        "its final round had not passed when the solve phase ended"
    ]
    assert state.lineages["L0"].accepted_version is None
    assert outcome.outcome != "solved"
    audit_ok(outcome.run_dir)


# ---------------------------------------------------------------- different final answers


def answers_differ(request: RecordedRequest) -> Reply:
    """L0 answers 2, L1 answers 3; the answer-3 proof passes its first round and fails every
    later verification; its revision answers 2."""
    role = scripts.role_of(request)
    if role == "generator":
        answer = "3" if _lineage_of_generator(request) == 1 else "2"
        return scripts.proof_reply(f"{scripts.GOOD_PROOF} ANSWER-{answer}", answer=answer)
    if role == "reviser":
        return scripts.proof_reply(f"{scripts.GOOD_PROOF} ANSWER-2", answer="2")
    if role == "verifier" and "ANSWER-3" in request.user_text:
        if _COUNTS.nth("three") > 2:
            return scripts.verdict([{**scripts.FLAW_FINDING, "location": "ANSWER-3"}])
        return scripts.verdict([])
    return scripts.solved(request)


_COUNTS = Counting()


def test_accepted_proofs_with_different_answers_are_both_reexamined(tmp_path: Path) -> None:
    _COUNTS.seen.clear()
    with ScriptedEndpoint(answers_differ) as fake:
        outcome = solve(fake, tmp_path, candidates=2, acceptance__accepted_needed=2)
    state = state_of(outcome.run_dir)
    decisions = _decisions(outcome.run_dir)
    # both were accepted with answers 2 and 3, and each got a re-examination of K = 2
    assert {(d[1], d[2]) for d in decisions if d[0] == "accepted"} >= {("L0", 0), ("L1", 0)}
    assert _ids(state, "L0.v0.recheck.") == ["L0.v0.recheck.0", "L0.v0.recheck.1"]
    assert _ids(state, "L1.v0.recheck.")[:1] == ["L1.v0.recheck.0"]
    assert ("recheck_passed", "L0", 0) in [d[:3] for d in decisions]
    assert ("unaccepted", "L1", 0) in [d[:3] for d in decisions]
    # L1 revised to answer 2: no disagreement left, so its new version needs no re-examination
    assert state.lineages["L1"].accepted_version == 1
    assert not _ids(state, "L1.v1.recheck.")
    assert outcome.outcome == "solved"
    audit_ok(outcome.run_dir)


def test_the_same_answer_is_not_reexamined(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.solved) as fake:
        outcome = solve(fake, tmp_path, candidates=2, acceptance__accepted_needed=2)
    assert not _ids(state_of(outcome.run_dir), ".recheck.")


# ---------------------------------------------------------------- grades


def varied_grades(request: RecordedRequest) -> Reply:
    role = scripts.role_of(request)
    if role == "grader":
        score = {1: 1, 2: 5, 3: 3}[min(_GRADES.nth("grade"), 3)]
        return scripts.json_reply("Assessment.", {"score": score, "justification": "j"})
    return scripts.never_accepted(request)


_GRADES = Counting()


def test_a_final_proof_gets_several_grades_and_their_median_counts(tmp_path: Path) -> None:
    _GRADES.seen.clear()
    with ScriptedEndpoint(varied_grades) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=1,
            acceptance__final_grades=3,
            acceptance__max_failed_rounds=1,
            acceptance__max_lineages=1,
        )
    state = state_of(outcome.run_dir)
    assert _ids(state, "grade.") == ["grade.L0.v0", "grade.L0.v0.1", "grade.L0.v0.2"]
    assert grade_of(state, state.lineages["L0"].versions[0]) == 3  # median of 1, 5, 3
    assert result_of(outcome.run_dir)["score"] == 3
    audit_ok(outcome.run_dir)


def test_an_accepted_proof_gets_one_grade(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.solved) as fake:
        outcome = solve(fake, tmp_path, candidates=1, acceptance__final_grades=3)
    assert _ids(state_of(outcome.run_dir), "grade.") == ["grade.L0.v0"]


_FIRST = Counting()


def one_good_proof(request: RecordedRequest) -> Reply:
    """The first proof written is sound; every other keeps a confirmed flaw."""
    role = scripts.role_of(request)
    if role == "generator" and _FIRST.nth("generator") == 1:
        return scripts.proof_reply(scripts.GOOD_PROOF)
    if role == "verifier":
        return scripts.verdict([scripts.FLAW_FINDING] if "FLAW" in request.user_text else [])
    return scripts.never_accepted(request)


def test_beside_an_accepted_proof_no_other_is_graded(tmp_path: Path) -> None:
    # the submission is an accepted proof: grading the others would spend decode on nothing
    _FIRST.seen.clear()
    with ScriptedEndpoint(one_good_proof) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=2,
            acceptance__accepted_needed=1,
            acceptance__max_lineages=2,
            acceptance__max_failed_rounds=1,
        )
    state = state_of(outcome.run_dir)
    (accepted,) = state.accepted()
    others = [ln for ln in state.lineages.values() if ln is not accepted and ln.versions]
    assert others  # a lineage with a proof that was not accepted
    assert _ids(state, "grade.") == [f"grade.{accepted.lineage}.v{accepted.accepted_version}"]
    assert result_of(outcome.run_dir)["outcome"] == "solved"
    audit_ok(outcome.run_dir)


def test_every_final_proof_is_graded_when_they_outnumber_the_concurrency(tmp_path: Path) -> None:
    # the engine starts two grades at a time; the third must not drop out of the selection
    with ScriptedEndpoint(scripts.never_accepted) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=3,
            concurrency=2,
            acceptance__max_failed_rounds=1,
            acceptance__max_lineages=3,
        )
    state = state_of(outcome.run_dir)
    assert _ids(state, "grade.") == ["grade.L0.v0", "grade.L1.v0", "grade.L2.v0"]
    audit_ok(outcome.run_dir)


# ---------------------------------------------------------------- pairwise selection


def _shown(request: RecordedRequest) -> list[str]:
    return re.findall(r"^## Proof ([A-Z]+)$", request.user_text, re.M)


def best_marked(pick: str) -> Responder:
    """Three proofs, L2's marked BEST and graded 7 (the others 6). ``pick``: "best" chooses
    the BEST proof in whichever position; "A" always chooses the first shown."""

    def responder(request: RecordedRequest) -> Reply:
        role = scripts.role_of(request)
        if role == "generator":
            mark = " BEST" if _lineage_of_generator(request) == 2 else ""
            return scripts.proof_reply(scripts.GOOD_PROOF + mark)
        if role == "grader":
            score = 7 if "BEST" in request.user_text else 6
            return scripts.json_reply("Assessment.", {"score": score, "justification": "j"})
        if role == "selector":
            assert _shown(request) == ["A", "B"], "a pairwise selector sees two proofs"
            choice = "A"
            if pick == "best":
                second = request.user_text.split("## Proof B", 1)[1]
                choice = "B" if "BEST" in second else "A"
            return scripts.json_reply("Choice.", {"choice": choice, "reason": "r"})
        return scripts.solved(request)

    return responder


def _pairwise(tmp_path: Path, responder: Responder) -> Path:
    with ScriptedEndpoint(responder) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=3,
            acceptance__accepted_needed=3,
            acceptance__pairwise_selection=True,
        )
    return outcome.run_dir


def test_a_bracket_of_pairwise_comparisons_in_both_orders_selects(tmp_path: Path) -> None:
    run = _pairwise(tmp_path, best_marked("best"))
    state = state_of(run)
    # three accepted: the best-ranked (L2, graded 7) has a bye, L0 meets L1, then the final
    assert _ids(state, "select") == [
        "select.1.0.ab",
        "select.1.0.ba",
        "select.2.0.ab",
        "select.2.0.ba",
    ]
    assert "select" not in state.calls  # no call holds every proof
    for call_id in ("select.1.0.ab", "select.2.0.ab"):
        ab, ba = state.calls[call_id], state.calls[call_id.replace(".ab", ".ba")]
        assert ab.variant == "pairwise"
        assert ab.target is not None and ba.target is not None
        assert pair_of(ab.target) == list(reversed(pair_of(ba.target)))
        facts = ab.facts
        assert isinstance(facts, SelectionFacts) and facts.shown == pair_of(ab.target)
    assert pair_of(state.calls["select.1.0.ab"].target or "") == [("L0", 0), ("L1", 0)]
    assert state.selected == ("L2", 0)
    assert state.selection_reason == "won a pairwise bracket of 3 (2 matches, 1 settled by rank)"
    audit_ok(run)


def test_orders_that_disagree_are_a_tie_that_goes_to_the_better_rank(tmp_path: Path) -> None:
    run = _pairwise(tmp_path, best_marked("A"))  # always the first shown: position, not proof
    state = state_of(run)
    assert state.selected == ("L2", 0)  # the best grade, not L0
    assert state.selection_reason.endswith("(2 matches, 2 settled by rank)")


def test_a_failed_selector_falls_back_by_rank_not_to_the_first_lineage(tmp_path: Path) -> None:
    marked = best_marked("best")

    def responder(request: RecordedRequest) -> Reply:
        if scripts.role_of(request) == "selector":
            return Reply(text="I cannot decide.", chunk_chars=16)
        return marked(request)

    for pairwise in (False, True):
        (tmp_path / str(pairwise)).mkdir()
        with ScriptedEndpoint(responder) as fake:
            outcome = solve(
                fake,
                tmp_path / str(pairwise),
                candidates=3,
                acceptance__accepted_needed=3,
                acceptance__pairwise_selection=pairwise,
            )
        state = state_of(outcome.run_dir)
        assert state.selected == ("L2", 0), pairwise
        if not pairwise:
            assert state.selection_reason.startswith("selector gave no usable choice")


def test_a_pair_target_names_two_versions_in_order() -> None:
    assert pair_of("L0.v3,L12.v0") == [("L0", 3), ("L12", 0)]
    for bad in ("L0,L1.v2", "L0.vx,L1.v2", ".v1,L1.v2"):
        with pytest.raises(ValueError):
            pair_of(bad)


def test_answer_keys_agree_on_one_answer_and_differ_on_two() -> None:
    assert answer_key("$\\boxed{2}$") == answer_key("2")
    assert answer_key("2") != answer_key("3")
