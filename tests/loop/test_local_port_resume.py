"""A run on the embedded model resumed after `solver local up` moved to a new port: resume
follows the descriptor, and the network audit accepts that session's new port (recorded in
its ``endpoint.probed``), and nothing else."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from solver.audit import AuditReport, audit_run
from solver.config import resolve_settings
from solver.endpoint_file import EndpointDescriptor, write_descriptor
from solver.store import RunReader, canonical_json
from solver.store.journal import line_hash
from solver.testing import FakeEndpoint
from tests.loop import scripts
from tests.loop.harness import flags_for, resume, start, write_problem

GGUF = "cd" * 32


def describe_local(fake: FakeEndpoint) -> None:
    write_descriptor(
        EndpointDescriptor(
            base_url=fake.url + "/v1",
            model="smollm2",
            source="local",
            pid=os.getpid(),
            gguf_sha256=GGUF,
        )
    )


def solve_on_local(fake: FakeEndpoint, home: Path) -> Path:
    problem_path = write_problem(home)
    flags = flags_for(fake, home)
    del flags["endpoint"]  # the descriptor `solver local up` wrote names the endpoint
    resolved = resolve_settings(flags=flags, env={}, cwd=home)
    created: list[Path] = []
    start(problem_path, resolved, on_created=created.append)
    return created[0]


def rewrite_journal(run_dir: Path, lines: list[dict[str, Any]]) -> None:
    """Write ``lines`` re-chained (seq and prev), as a forger who rewrites the chain would."""
    head = line_hash((run_dir / "MANIFEST.json").read_bytes())
    out = []
    for seq, record in enumerate(lines):
        record["seq"], record["prev"] = seq, head
        line = canonical_json(record)
        head = line_hash(line)
        out.append(line + b"\n")
    (run_dir / "journal.jsonl").write_bytes(b"".join(out))


def journal(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "journal.jsonl").read_bytes().splitlines()]


def network_failures(report: AuditReport) -> list[str]:
    return [c.detail for c in report.checks if c.name == "network" and c.status == "fail"]


def test_resume_on_a_moved_local_server_audits_clean_and_a_third_port_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOLVER_ENDPOINT_FILE", str(tmp_path / "endpoint.json"))
    home = tmp_path / "home"
    home.mkdir()
    with FakeEndpoint(scripts.solved) as first:
        describe_local(first)
        run_dir = solve_on_local(first, home)
        first_port = urlsplit(first.url).port
    manifest = RunReader(run_dir).manifest
    assert manifest["endpoint"]["source"] == "local"
    # Killed after a call that opened a connection finished: cut the journal there.
    records = journal(run_dir)
    opened = next(i for i, r in enumerate(records) if r["type"] == "net.connect")
    cut = next(i for i, r in enumerate(records) if i > opened and r["type"] == "call.completed")
    rewrite_journal(run_dir, records[: cut + 1])
    with FakeEndpoint(scripts.solved) as second:
        describe_local(second)  # `solver local up` again, on another port
        assert resume(run_dir, home).outcome == "solved"
        second_port = urlsplit(second.url).port
    assert second_port != first_port
    ports = {
        int(str(r["data"]["address"]).rpartition(":")[2])
        for r in journal(run_dir)
        if r["type"] == "net.connect"
    }
    assert ports == {first_port, second_port}
    report = audit_run(run_dir)
    assert report.ok, [c for c in report.checks if c.status == "fail"]

    # A connection of the resumed session forged to a third port is still refused.
    records = journal(run_dir)
    resumed = max(int(r["sess"]) for r in records)
    forged = next(r for r in records if r["type"] == "net.connect" and r["sess"] == resumed)
    third = next(p for p in range(40000, 40100) if p not in (first_port, second_port))
    forged["data"]["address"] = f"127.0.0.1:{third}"
    rewrite_journal(run_dir, records)
    failing = network_failures(audit_run(run_dir))
    assert len(failing) == 1 and f"127.0.0.1:{third}" in failing[0]


def test_a_configured_endpoint_does_not_follow_a_probed_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the embedded model's port may move: a run on a configured endpoint whose session
    claims another probed port still fails on connections to it."""
    monkeypatch.setenv("SOLVER_ENDPOINT_FILE", str(tmp_path / "endpoint.json"))
    home = tmp_path / "home"
    home.mkdir()
    problem_path = write_problem(home)
    with FakeEndpoint(scripts.solved) as fake:
        resolved = resolve_settings(flags=flags_for(fake, home), env={}, cwd=home)
        created: list[Path] = []
        start(problem_path, resolved, on_created=created.append)
        port = urlsplit(fake.url).port
    run_dir = created[0]
    moved = next(p for p in range(40000, 40100) if p != port)
    records = journal(run_dir)
    for record in records:
        data = record["data"]
        assert isinstance(data, dict)
        if record["type"] == "endpoint.probed":
            data["url"] = str(data["url"]).replace(f":{port}", f":{moved}")
        if record["type"] == "net.connect":
            data["address"] = f"127.0.0.1:{moved}"
    rewrite_journal(run_dir, records)
    assert network_failures(audit_run(run_dir))
