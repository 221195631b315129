"""The audit reads a response as the live client did, with the request's reasoning setting.

With reasoning asked for, a Chat answer that ends in ``</think>`` and nothing after it (the
model's template opened the thinking in the prompt, and the server has no reasoning parser)
is reasoning that the client promotes to text, as it does for a server that put the whole
answer on its reasoning channel. The audit once decoded such a response without that
setting, derived an empty proof from it and failed a run made correctly."""

from __future__ import annotations

from pathlib import Path

from solver.audit import audit_run
from solver.testing import RecordedRequest, role_of
from solver.testing.fake_endpoint import Reply
from tests.loop import scripts
from tests.loop.harness import ScriptedEndpoint, solve


def _orphan_close(request: RecordedRequest) -> Reply:
    if role_of(request) == "generator":
        text = f"## Proof\n\n{scripts.GOOD_PROOF}\n\n## Final answer\n\nNot applicable</think>"
        return Reply(text=text, chunk_chars=64)
    return scripts.solved(request)


def test_a_proof_that_ends_in_a_closing_think_tag_audits_clean(tmp_path: Path) -> None:
    with ScriptedEndpoint(_orphan_close) as fake:
        outcome = solve(fake, tmp_path, candidates=1, roles__generator__reasoning=True)
    report = audit_run(outcome.run_dir)
    isolation = [c for c in report.checks if c.name == "isolation"]
    assert [c.status for c in isolation] == ["pass"], isolation
    assert "proofs and reports re-derived" in isolation[0].detail
