"""Markers planted where a role must not look never reach a context the policy forbids them.

Checked on the request bytes recorded in the journal (what was actually sent)."""

from __future__ import annotations

from pathlib import Path

from solver.store import RunReader
from solver.testing import FakeEndpoint
from tests.loop import scripts
from tests.loop.harness import EVAL_PROBLEM, audit_ok, result_of, solve

MARK_REFERENCE = "MARKER-REFERENCE-55aa"


def sent_requests(run_dir: Path) -> list[tuple[str, str, bytes]]:
    """(call id, role, request bytes) of every attempt, from the journal."""
    reader = RunReader(run_dir)
    roles: dict[str, str] = {}
    sent = []
    for rec in reader.records():
        if rec.type == "call.planned":
            roles[rec.data["call_id"]] = rec.data["role"]
        elif rec.type == "llm.started":
            call = rec.data["call_id"]
            sent.append((call, roles[call], reader.read_blob(rec.data["request"]["blob"])))
    return sent


def test_markers_stay_where_policy_allows(tmp_path: Path) -> None:
    with FakeEndpoint(scripts.fix_after_finding) as fake:
        outcome = solve(fake, tmp_path, EVAL_PROBLEM, candidates=1, grading__evaluation_graders=3)
    assert outcome.outcome == "solved"
    sent = sent_requests(outcome.run_dir)
    roles_seen = {role for _, role, _ in sent}
    assert {
        "generator",
        "verifier",
        "reviewer",
        "reviser",
        "grader",
        "grader:evaluation",
    } <= roles_seen

    for call, role, body in sent:
        assert scripts.MARK_REASONING.encode() not in body, call
        assert scripts.MARK_SELF.encode() not in body, call
        if scripts.MARK_REPORT.encode() in body:
            assert role == "reviewer", call
        if MARK_REFERENCE.encode() in body:
            assert role == "grader:evaluation", call
    # The markers did reach the run: in responses, and the reference in evaluation grading.
    assert any(MARK_REFERENCE.encode() in body for _, _, body in sent)
    # The reviewer sees the verifier's findings, in the loop's listing, never its prose.
    assert not any(scripts.MARK_REPORT.encode() in body for _, _, body in sent)
    flaw = scripts.FLAW_FINDING["explanation"].encode()
    assert any(flaw in body for _, role, body in sent if role == "reviewer")
    result = result_of(outcome.run_dir)
    assert result["evaluation"]["scores"] == [7, 7, 7]
    assert result["evaluation_score"] == 7
    audit_ok(outcome.run_dir)


def test_blind_run_never_sends_the_reference(tmp_path: Path) -> None:
    with FakeEndpoint(scripts.solved) as fake:
        outcome = solve(fake, tmp_path, EVAL_PROBLEM, blind=True)
    sent = sent_requests(outcome.run_dir)
    assert sent and not any(MARK_REFERENCE.encode() in body for _, _, body in sent)
    assert result_of(outcome.run_dir)["evaluation_score"] is None
    audit_ok(outcome.run_dir)
