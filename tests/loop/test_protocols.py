"""The same loop over each protocol: Chat Completions, Responses and Anthropic Messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.testing import FakeEndpoint
from tests.loop import scripts
from tests.loop.harness import audit_ok, solve


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_solved_over_each_protocol(tmp_path: Path, api: str) -> None:
    with FakeEndpoint(scripts.fix_after_finding) as fake:
        outcome = solve(fake, tmp_path, api=api, candidates=1)
    assert outcome.outcome == "solved"
    paths = {request.path for request in fake.requests}
    expected = {
        "chat": "/v1/chat/completions",
        "responses": "/v1/responses",
        "anthropic": "/v1/messages",
    }[api]
    assert expected in paths
    audit_ok(outcome.run_dir)
