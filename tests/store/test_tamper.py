"""Every tampering the issue lists is detected by `solver audit`, with the place named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from solver.store import canonical_json

from .conftest import (
    BuiltRun,
    Keys,
    audit_store,
    build_run,
    failure_text,
    failures,
    journal_lines,
    write_lines,
)


@pytest.fixture
def signed_run(tmp_path: Path, keys: Keys) -> BuiltRun:
    return build_run(tmp_path / "run", keys.private)


def blob_path(run: BuiltRun, digest: str) -> Path:
    hex_digest = digest.removeprefix("sha256:")
    return run.path / "blobs" / "sha256" / hex_digest[:2] / hex_digest


def test_untouched_signed_run_passes_every_check(signed_run: BuiltRun, keys: Keys) -> None:
    report = audit_store(signed_run.path, public_key=keys.public)
    assert report.ok, failure_text(report)
    assert {c.status for c in report.checks} == {"pass"}
    names = {c.name for c in report.checks}
    assert {"manifest", "chain", "blobs", "references", "final", "seals", "attestation"} <= names


@pytest.mark.parametrize("which", ["prompt", "request", "response", "proof"])
def test_one_flipped_byte_in_any_blob_names_the_blob(signed_run: BuiltRun, which: str) -> None:
    ref = getattr(signed_run, which)
    path = blob_path(signed_run, ref.digest)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    report = audit_store(signed_run.path)
    bad = [c for c in failures(report) if c.name == "blobs"]
    assert len(bad) == 1
    assert bad[0].where == f"blobs/sha256/{ref.hex[:2]}/{ref.hex}"


def _edit_data(line: bytes, **changes: object) -> bytes:
    record = json.loads(line)
    record["data"].update(changes)
    return canonical_json(record) + b"\n"


def test_edited_journal_line_names_the_line(signed_run: BuiltRun) -> None:
    lines = journal_lines(signed_run.path)
    assert json.loads(lines[3])["type"] == "test.context"
    lines[3] = _edit_data(lines[3], call_id="c2")
    write_lines(signed_run.path, lines)
    report = audit_store(signed_run.path)
    chain = [c for c in failures(report) if c.name == "chain"]
    assert chain[0].where == "journal.jsonl line 4 (seq 4)"
    assert "line 3" in chain[0].detail


def test_deleted_journal_line_is_found(signed_run: BuiltRun) -> None:
    lines = journal_lines(signed_run.path)
    del lines[2]
    write_lines(signed_run.path, lines)
    chain = [c for c in failures(audit_store(signed_run.path)) if c.name == "chain"]
    assert chain[0].where == "journal.jsonl line 2 (seq 3)"
    assert "seq 3 where 2 was expected" in chain[0].detail


def test_swapped_journal_lines_are_found(signed_run: BuiltRun) -> None:
    lines = journal_lines(signed_run.path)
    lines[2], lines[3] = lines[3], lines[2]
    write_lines(signed_run.path, lines)
    chain = [c for c in failures(audit_store(signed_run.path)) if c.name == "chain"]
    assert chain[0].where == "journal.jsonl line 2 (seq 3)"
    assert chain[1].where == "journal.jsonl line 3 (seq 2)"


def test_duplicated_journal_line_is_found(signed_run: BuiltRun) -> None:
    lines = journal_lines(signed_run.path)
    lines.insert(3, lines[2])
    write_lines(signed_run.path, lines)
    chain = [c for c in failures(audit_store(signed_run.path)) if c.name == "chain"]
    assert chain[0].where == "journal.jsonl line 3 (seq 2)"
    assert "duplicated" in chain[0].detail


def test_journal_truncated_after_a_seal_is_found(signed_run: BuiltRun) -> None:
    lines = journal_lines(signed_run.path)
    seals = [json.loads(line) for line in lines if json.loads(line)["type"] == "seal"]
    last = seals[-1]
    write_lines(signed_run.path, lines[: last["seq"] - 1])  # cut records the seal covered
    report = audit_store(signed_run.path)
    bad = [c for c in failures(report) if c.name == "seals"]
    assert any(c.where == last["data"]["file"] and "truncated" in c.detail for c in bad), (
        failure_text(report)
    )
    assert any(c.name == "attestation" and "truncated" in c.detail for c in failures(report))


def test_edited_last_line_is_caught_by_the_attestation(signed_run: BuiltRun) -> None:
    lines = journal_lines(signed_run.path)
    lines[-1] = _edit_data(lines[-1], keyid="0" * 64)
    write_lines(signed_run.path, lines)
    report = audit_store(signed_run.path)
    assert not [c for c in failures(report) if c.name == "chain"]  # nothing chains after it
    assert any(c.name == "attestation" and "altered" in c.detail for c in failures(report))


def test_replaced_manifest_is_found(signed_run: BuiltRun) -> None:
    manifest = json.loads((signed_run.path / "MANIFEST.json").read_bytes())
    manifest["model"]["served"] = "another-model"
    (signed_run.path / "MANIFEST.json").write_bytes(canonical_json(manifest))
    report = audit_store(signed_run.path)
    bad = [c for c in failures(report) if c.name == "manifest"]
    assert bad[0].where == "MANIFEST.json"
    assert "replaced" in bad[0].detail
    assert any(c.where == "journal.jsonl line 0 (seq 0)" for c in failures(report))


def test_removed_blob_names_the_records_that_need_it(signed_run: BuiltRun) -> None:
    blob_path(signed_run, signed_run.request.digest).unlink()
    report = audit_store(signed_run.path)
    bad = [c for c in failures(report) if c.name == "references"]
    assert len(bad) == 1
    started = next(
        json.loads(line)
        for line in journal_lines(signed_run.path)
        if json.loads(line)["type"] == "test.request"
    )
    assert bad[0].where == f"journal.jsonl seq {started['seq']}"
    assert signed_run.request.digest in bad[0].detail


def test_prompt_blob_swapped_for_another_valid_blob_is_found(signed_run: BuiltRun) -> None:
    # The bytes of a different, valid blob put at the prompt's name: the name no longer fits.
    blob_path(signed_run, signed_run.prompt.digest).write_bytes(
        blob_path(signed_run, signed_run.request.digest).read_bytes()
    )
    bad = [c for c in failures(audit_store(signed_run.path)) if c.name == "blobs"]
    assert bad[0].where is not None and signed_run.prompt.hex in bad[0].where


def test_record_repointed_to_another_valid_blob_is_found(signed_run: BuiltRun) -> None:
    # The record made to name another existing blob instead: the chain breaks after it.
    lines = journal_lines(signed_run.path)
    assert json.loads(lines[3])["type"] == "test.context"
    lines[3] = _edit_data(lines[3], messages=signed_run.request.as_ref())
    write_lines(signed_run.path, lines)
    bad = [c for c in failures(audit_store(signed_run.path)) if c.name == "chain"]
    assert bad[0].where == "journal.jsonl line 4 (seq 4)"


def test_edited_final_file_is_found(signed_run: BuiltRun) -> None:
    (signed_run.path / "final" / "proof.md").write_text("# A better proof\n")
    bad = [c for c in failures(audit_store(signed_run.path)) if c.name == "final"]
    assert bad[0].where == "final/proof.md"


def test_deleted_final_file_is_found(signed_run: BuiltRun) -> None:
    (signed_run.path / "final" / "proof.md").unlink()
    bad = [c for c in failures(audit_store(signed_run.path)) if c.name == "final"]
    assert bad[0].where == "final/proof.md" and "missing" in bad[0].detail


def test_signatures_by_another_key_fail(signed_run: BuiltRun, other_keys: Keys) -> None:
    report = audit_store(signed_run.path, public_key=other_keys.public)
    assert any(
        c.name == "seals" and c.where and c.where.startswith("seals/") for c in failures(report)
    )
    assert any(c.name == "attestation" for c in failures(report))
    assert any(c.status == "warn" and "manifest names key" in c.detail for c in report.checks)


def test_deleted_seal_file_is_found(signed_run: BuiltRun) -> None:
    seal = sorted((signed_run.path / "seals").iterdir())[0]
    seal.unlink()
    bad = [c for c in failures(audit_store(signed_run.path)) if c.name == "seals"]
    assert "missing" in bad[0].detail and bad[0].where is not None
    assert bad[0].where.startswith("journal.jsonl seq")


def test_replaced_seal_file_is_found(signed_run: BuiltRun, keys: Keys) -> None:
    first, second = sorted((signed_run.path / "seals").iterdir())[:2]
    first.write_bytes(second.read_bytes())
    report = audit_store(signed_run.path, public_key=keys.public)
    bad = [c for c in failures(report) if c.name == "seals"]
    assert any(c.where == f"seals/{first.name}" for c in bad)


def test_replaced_attestation_subject_is_found(signed_run: BuiltRun, keys: Keys) -> None:
    # Re-signed with the right key but naming another proof: the subjects disagree.
    from solver.store.attest import PAYLOAD_INTOTO, load_private_key, sign_envelope

    path = signed_run.path / "attestation.intoto.jsonl"
    envelope = json.loads(path.read_bytes())
    import base64

    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["subject"][0]["digest"]["sha256"] = "0" * 64
    path.write_bytes(
        sign_envelope(PAYLOAD_INTOTO, canonical_json(statement), load_private_key(keys.private))
    )
    bad = [
        c
        for c in failures(audit_store(signed_run.path, public_key=keys.public))
        if c.name == "attestation"
    ]
    assert "differ from the final artifacts" in bad[0].detail
