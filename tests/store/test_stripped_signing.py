"""A signed run whose seals and attestation were removed, and its journal re-chained so the
chain itself still verifies, must not audit clean: with or without the key."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from solver.store import canonical_json
from solver.store.journal import line_hash

from .conftest import Keys, audit_store, build_run, failures


def strip_signing(run_dir: Path) -> None:
    """Drop seals/, the attestation and every seal record, then re-chain what is left."""
    shutil.rmtree(run_dir / "seals")
    (run_dir / "attestation.intoto.jsonl").unlink()
    manifest = (run_dir / "MANIFEST.json").read_bytes()
    head = line_hash(manifest)
    lines = []
    for raw in (run_dir / "journal.jsonl").read_bytes().splitlines():
        record = json.loads(raw)
        if record["type"] == "seal":
            continue
        record["seq"], record["prev"] = len(lines), head
        line = canonical_json(record)
        head = line_hash(line)
        lines.append(line + b"\n")
    (run_dir / "journal.jsonl").write_bytes(b"".join(lines))


def test_stripped_signed_run_fails_with_the_key(tmp_path: Path, keys: Keys) -> None:
    run = build_run(tmp_path / "run", keys.private)
    strip_signing(run.path)
    report = audit_store(run.path, keys.public)
    found = {(c.name, c.detail) for c in failures(report)}
    assert ("seals", "the run carries no seals") in found
    assert any(name == "attestation" and "no attestation" in d for name, d in found)
    assert {c.name for c in failures(report)} == {"seals", "attestation"}  # the chain holds


def test_stripped_signed_run_fails_without_a_key(tmp_path: Path, keys: Keys) -> None:
    run = build_run(tmp_path / "run", keys.private)
    strip_signing(run.path)
    report = audit_store(run.path)
    assert not report.ok
    assert {c.name for c in failures(report)} == {"seals", "attestation"}


def test_intact_signed_run_passes(tmp_path: Path, keys: Keys) -> None:
    run = build_run(tmp_path / "run", keys.private)
    assert audit_store(run.path, keys.public).ok
    assert audit_store(run.path).ok
