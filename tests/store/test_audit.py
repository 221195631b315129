"""The audit's less common findings, its extension registry, and the two CLI commands."""

from __future__ import annotations

import base64
import errno
import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from solver.audit import AuditContext, Check, audit_run, default_checks, statuses, store_checks
from solver.audit.base import MAX_ROWS_PER_CHECK
from solver.audit.signatures import check_seals
from solver.audit.store_checks import check_blobs
from solver.cli.audit import audit
from solver.cli.keys import default_key_dir
from solver.cli.keys import keys as keys_group
from solver.store import RunReader, RunStore, StorageFull, canonical_json
from solver.store.attest import PAYLOAD_INTOTO, PAYLOAD_SEAL, load_private_key, sign_envelope

from .conftest import MANIFEST, BuiltRun, Keys, audit_store, build_run

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "run-v1-signed"
FIXTURE_KEY = FIXTURE.with_name("run-v1-signed.pub")


@pytest.fixture
def run(tmp_path: Path) -> BuiltRun:
    return build_run(tmp_path / "run")


def rows(report_checks: list[Check], name: str, status: str) -> list[Check]:
    return [c for c in report_checks if c.name == name and c.status == status]


def test_missing_manifest_and_empty_journal(tmp_path: Path, run: BuiltRun) -> None:
    (run.path / "MANIFEST.json").unlink()
    report = audit_store(run.path)
    assert rows(report.checks, "manifest", "fail")[0].where == "MANIFEST.json"
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "MANIFEST.json").write_bytes(canonical_json({"format": "solver-run/1"}))
    report = audit_store(empty)
    assert rows(report.checks, "manifest", "fail")[0].detail == "journal has no record 0"
    with pytest.raises(Exception, match="no such directory"):
        audit_run(tmp_path / "nowhere")


def test_quarantine_findings(run: BuiltRun) -> None:
    (run.path / "journal.jsonl").open("ab").write(b'{"torn')
    RunStore.open(run.path).close()
    quarantined = next((run.path / "quarantine").iterdir())
    assert rows(audit_store(run.path).checks, "chain", "warn")
    quarantined.write_bytes(b"other")
    assert "differs" in rows(audit_store(run.path).checks, "chain", "fail")[0].detail
    quarantined.unlink()
    assert "missing" in rows(audit_store(run.path).checks, "chain", "fail")[0].detail
    (run.path / "quarantine" / "stray.tail").write_bytes(b"x")
    warned = rows(audit_store(run.path).checks, "chain", "warn")
    assert warned[0].where == "quarantine/stray.tail"


def test_misplaced_stray_and_leftover_blob_files(run: BuiltRun) -> None:
    tree = run.path / "blobs" / "sha256"
    source = tree / run.prompt.hex[:2] / run.prompt.hex
    wrong_fan = tree / "zz"
    wrong_fan.mkdir()
    shutil.move(source, wrong_fan / run.prompt.hex)
    (tree / "stray").write_bytes(b"x")
    (run.path / "blobs" / "tmp").mkdir(exist_ok=True)
    (run.path / "blobs" / "tmp" / ".blob.1.tmp").write_bytes(b"half")
    report = audit_store(run.path)
    failed = {c.where for c in rows(report.checks, "blobs", "fail")}
    assert failed == {f"blobs/sha256/zz/{run.prompt.hex}", "blobs/sha256/stray"}
    assert rows(report.checks, "blobs", "warn")[0].where == "blobs/tmp"
    RunStore.open(run.path).close()  # the writer cleans up its temp files
    assert not rows(audit_store(run.path).checks, "blobs", "warn")


def test_unreferenced_blob_warns_and_unnamed_final_file_fails(run: BuiltRun) -> None:
    with RunStore.open(run.path) as store:
        stray = store.put_blob(b"written, then the writer died before naming it")
    report = audit_store(run.path)
    assert report.ok
    assert stray.hex in str(rows(report.checks, "references", "warn")[0].where)
    # Format 2: final/ is bound to the journal, so a file it does not name fails.
    (run.path / "final" / "notes.txt").write_text("added by hand")
    report = audit_store(run.path)
    assert [c.where for c in rows(report.checks, "final", "fail")] == ["final/notes.txt"]


def test_many_findings_are_capped(tmp_path: Path) -> None:
    with RunStore.create(tmp_path / "run", MANIFEST) as store:
        for index in range(MAX_ROWS_PER_CHECK + 5):
            ref = store.put_blob(b"%d" % index)
            store.append("x", {"b": ref.as_ref()})
            store.blobs.path_for(ref.digest).unlink()
    found = [c for c in audit_store(tmp_path / "run").checks if c.name == "references"]
    assert len(found) == MAX_ROWS_PER_CHECK + 1 and found[-1].detail == "5 more"


def test_unsigned_run_reports_no_seals(run: BuiltRun, keys: Keys) -> None:
    assert rows(audit_store(run.path).checks, "seals", "pass")[0].detail == (
        "the run carries no seals"
    )
    # Checked with a key, a run without seals or attestation may have had them stripped.
    checked = audit_store(run.path, keys.public).checks
    assert rows(checked, "seals", "fail")[0].detail == "the run carries no seals"
    assert "no attestation" in rows(checked, "attestation", "fail")[0].detail


def _resign(path: Path, key: Path, payload_type: str, payload: bytes) -> None:
    path.write_bytes(sign_envelope(payload_type, payload, load_private_key(key)))


def test_forged_seal_contents(tmp_path: Path, keys: Keys) -> None:
    run = build_run(tmp_path / "run", keys.private)
    seal = sorted((run.path / "seals").iterdir())[0]
    envelope = json.loads(seal.read_bytes())
    payload = json.loads(base64.b64decode(envelope["payload"]))
    cases = [
        (PAYLOAD_INTOTO, canonical_json(payload), "payloadType"),
        (PAYLOAD_SEAL, b"not json", "not JSON"),
        (PAYLOAD_SEAL, canonical_json({**payload, "run": "another"}), "for run another"),
        (PAYLOAD_SEAL, canonical_json({**payload, "count": 0}), "no valid record count"),
    ]
    for payload_type, body, reason in cases:
        _resign(seal, keys.private, payload_type, body)
        found = rows(audit_store(run.path, keys.public).checks, "seals", "fail")
        assert any(reason in c.detail and c.where == f"seals/{seal.name}" for c in found), reason


def test_seal_record_claiming_another_count(tmp_path: Path, keys: Keys) -> None:
    run = build_run(tmp_path / "run", keys.private)
    reader = RunReader(run.path)
    ctx = AuditContext(reader, reader.manifest, None, reader.scan(), None)
    index, seal = next((i, r) for i, r in enumerate(ctx.records) if r.type == "seal")
    ctx.records[index] = replace(seal, seq=seal.seq + 1)  # as if a line had been inserted
    assert any("claims count" in c.detail for c in check_seals(ctx))


def test_forged_attestations(tmp_path: Path, keys: Keys) -> None:
    run = build_run(tmp_path / "run", keys.private)
    path = run.path / "attestation.intoto.jsonl"
    statement = json.loads(base64.b64decode(json.loads(path.read_bytes())["payload"]))
    path.write_bytes(path.read_bytes() * 2)
    assert "found 2" in rows(audit_store(run.path).checks, "attestation", "fail")[0].detail
    cases = [
        ({**statement, "_type": "other"}, "not an in-toto Statement"),
        ({**statement, "subject": statement["subject"][:-1]}, "no journal.jsonl@<count>"),
    ]
    for forged, reason in cases:
        _resign(path, keys.private, PAYLOAD_INTOTO, canonical_json(forged))
        found = rows(audit_store(run.path, keys.public).checks, "attestation", "fail")
        assert reason in found[0].detail


def test_records_after_the_attestation_warn(tmp_path: Path, keys: Keys) -> None:
    run = build_run(tmp_path / "run", keys.private)
    with RunStore.open(run.path) as store:
        store.append("late", {})
    report = audit_store(run.path, keys.public)
    assert report.ok
    assert "1 records after the attestation" in rows(report.checks, "attestation", "warn")[0].detail


def test_given_checks_run_and_a_crashing_check_is_a_failure(run: BuiltRun) -> None:
    def check_custom(ctx: AuditContext) -> list[Check]:
        return [Check(name="custom", status="pass", detail=f"{len(ctx.records)} records")]

    def check_broken(ctx: AuditContext) -> list[Check]:
        raise KeyError("attempt")

    defaults = default_checks()
    assert len(set(defaults)) == len(defaults) and set(store_checks()) < set(defaults)
    report = audit_run(run.path, checks=[*store_checks(), check_custom, check_broken])
    assert rows(report.checks, "custom", "pass")
    broken = rows(report.checks, "broken", "fail")
    assert broken[0].detail == "check could not run: KeyError: 'attempt'"
    assert statuses(report.checks)["fail"] == 1 and not report.ok


def test_blob_commit_failure_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with RunStore.create(tmp_path / "run", MANIFEST) as store:
        writer = store.blob_writer()
        writer.write(b"partial")

        def full(fd: int) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(os, "fsync", full)
        with pytest.raises(StorageFull):
            writer.commit()
        monkeypatch.undo()
        assert list(store.blobs.tmp.iterdir()) == []
        assert not store.blobs.exists("sha256:" + "3" * 64)
    store.set_session(9)  # after close: only the in-memory number changes
    reader = RunReader(tmp_path / "run")
    ref = RunStore.open(tmp_path / "run")
    blob = ref.put_blob(b"r")
    ref.close()
    assert reader.read_blob(blob) == b"r" and reader.blob_exists(blob)
    with reader.open_blob(blob.digest) as handle:
        assert handle.read() == b"r"
    assert RunReader(tmp_path / "run").blob_exists(blob.digest)


# ---------------------------------------------------------------------- command line


def test_cli_audit_exit_codes_and_json(tmp_path: Path, other_keys: Keys) -> None:
    # A real run: the full audit refuses the synthetic record types of build_run's runs.
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    runner = CliRunner()
    result = runner.invoke(audit, [str(run), "--json", "--key", str(FIXTURE_KEY)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["ok"] is True and {"name", "status", "detail", "where"} <= set(data["checks"][0])
    table = runner.invoke(audit, [str(run)])
    assert table.exit_code == 0 and "manifest" in table.output and "OK:" in table.output
    bad = runner.invoke(audit, [str(run), "--key", str(other_keys.public)])
    assert bad.exit_code == 4 and "FAILED" in bad.output
    assert runner.invoke(audit, [str(tmp_path / "nope")]).exit_code == 6
    assert runner.invoke(audit, [str(run), "--key", str(tmp_path / "nokey")]).exit_code == 6
    junk = tmp_path / "junk.pub"
    junk.write_text("junk")
    result = runner.invoke(audit, [str(run), "--key", str(junk)])
    assert result.exit_code == 2 and "cannot read public key" in result.output


def test_cli_keys_new(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    result = runner.invoke(keys_group, ["new", "--out", str(tmp_path / "k")])
    assert result.exit_code == 0, result.output
    assert "key id:" in result.output and (tmp_path / "k" / "solver-ed25519.pub").is_file()
    again = runner.invoke(keys_group, ["new", "--out", str(tmp_path / "k")])
    assert again.exit_code == 2 and "already exists" in again.output
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert default_key_dir() == tmp_path / "xdg" / "olympiad-solver" / "keys"
    assert runner.invoke(keys_group, ["new"]).exit_code == 0
    assert (default_key_dir() / "solver-ed25519.key").is_file()


def test_checks_work_on_a_hand_made_context(run: BuiltRun) -> None:
    """Extension checks (and tests) may build a context themselves: blobs are then listed
    and hashed on demand."""
    reader = RunReader(run.path)
    ctx = AuditContext(reader, reader.manifest, None, reader.scan(), None)
    (row,) = check_blobs(ctx)
    assert row.status == "pass" and row.detail.startswith(f"{len(ctx.blob_files)} blobs")
