"""An API key reaches the endpoint and nothing else: not the manifest, journal, blobs or
final files of the run."""

from __future__ import annotations

from pathlib import Path

from solver.testing import FakeEndpoint
from tests.loop import scripts
from tests.loop.harness import audit_ok, solve

KEY = "sk-test-9f8e7d6c5b4a-never-written"


def test_api_key_is_sent_but_never_stored(tmp_path: Path) -> None:
    with FakeEndpoint(scripts.solved) as fake:
        outcome = solve(fake, tmp_path, api_key=KEY, candidates=1)
    sent = [
        r.headers.get("authorization", "") or r.headers.get("Authorization", "")
        for r in fake.requests
    ]
    assert any(KEY in header for header in sent)
    for path in outcome.run_dir.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    audit_ok(outcome.run_dir)
