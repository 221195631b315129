"""The endpoint probe's connection is journaled too: calls after it may reuse it over
keep-alive, and then it is the only record of where they went."""

from __future__ import annotations

from pathlib import Path

from solver.audit import audit_run
from solver.store import RunReader
from solver.testing import FakeEndpoint
from tests.loop import scripts
from tests.loop.harness import solve


def test_the_probe_connection_is_recorded_before_the_probe_result(tmp_path: Path) -> None:
    with FakeEndpoint(scripts.solved) as fake:
        run_dir = solve(fake, tmp_path, candidates=1, budget__calls=3).run_dir
        port = fake.url.rsplit(":", 1)[1]
    records = list(RunReader(run_dir).records())
    types = [r.type for r in records]
    first_connect = types.index("net.connect")
    assert first_connect < types.index("endpoint.probed")
    probe = records[first_connect].data
    assert probe["call_id"] == "" and probe["address"] == f"127.0.0.1:{port}"
    network = [c for c in audit_run(run_dir).checks if c.name == "network"]
    assert [c.status for c in network] == ["pass"], network
