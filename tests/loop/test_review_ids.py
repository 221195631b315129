"""A reviewer's decision lands on the finding it names: the reviewer is shown the findings
under the ids the loop keys reviews on, even when the verifier omitted or repeated ids."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from solver.roles import verifier
from solver.testing import FakeEndpoint, RecordedRequest
from solver.testing.fake_endpoint import Reply
from tests.loop import scripts
from tests.loop.harness import audit_ok, solve, state_of

REAL = {"location": "we also assume", "severity": "critical", "explanation": "A real gap."}
WRONG = {"location": "modulo 4", "severity": "major", "explanation": "WRONG-CLAIM here."}


def _reviewer_rejects_wrong(findings: list[dict[str, Any]]) -> Callable[[RecordedRequest], Reply]:
    """Rejects the finding that explains WRONG-CLAIM under whatever id it was shown with: a
    listing block, or failing that the verifier's own JSON (as a model reading it would)."""

    def responder(request: RecordedRequest) -> Reply:
        role = scripts.role_of(request)
        if role == "verifier":
            return scripts.json_reply("Analysis.", {"findings": findings, "verdict": "fail"})
        if role != "reviewer":
            return scripts.never_accepted(request)
        text = request.user_text
        shown = re.search(r"### Finding (\S+) \(severity[^#]*?WRONG-CLAIM", text)
        ident = shown.group(1) if shown else None
        if ident is None:
            raw = re.search(r'"id": "([^"]+)"[^{}]*WRONG-CLAIM', text)
            ident = raw.group(1) if raw else "?"
        return scripts.json_reply(
            "Review.", {"reviews": [{"id": ident, "decision": "rejected", "reason": "fine"}]}
        )

    return responder


@pytest.mark.parametrize(
    "findings",
    [
        [REAL, {**WRONG, "id": "F1"}],  # no id first, then an explicit F1
        [{**REAL, "id": "F1"}, {**WRONG, "id": "F1"}],  # one id given twice
    ],
    ids=["missing-then-F1", "repeated-F1"],
)
def test_a_rejection_lands_on_the_finding_the_reviewer_named(
    findings: list[dict[str, Any]], tmp_path: Path
) -> None:
    with FakeEndpoint(_reviewer_rejects_wrong(findings)) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=1,
            acceptance__verifications=1,
            acceptance__max_failed_rounds=1,
            acceptance__max_lineages=1,
        )
    state = state_of(outcome.run_dir)
    reviews = [c for c in state.calls.values() if c.role == "reviewer"]
    assert reviews
    for review in reviews:
        verification = state.calls[review.target or ""]
        by_id = {f.id: f for f in verification.facts.findings}
        assert [by_id[i].explanation for i in review.facts.rejected] == ["WRONG-CLAIM here."]
        assert [by_id[i].explanation for i in review.facts.confirmed] == ["A real gap."]
    audit_ok(outcome.run_dir)


def test_missing_ids_take_numbers_no_explicit_id_uses() -> None:
    text = (
        '```json\n{"findings": [{"explanation": "a"}, {"id": "F1", "explanation": "b"}, '
        '{"explanation": "c"}], "verdict": "fail"}\n```'
    )
    ids = [f.id for f in verifier.parse(text).findings]
    assert ids == ["F2", "F1", "F3"]
