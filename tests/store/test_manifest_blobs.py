"""Blobs stored with the manifest, and the stop reason a writer leaves in the lock file."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from solver.store import BlobMissing, RunReader, RunStore
from solver.store.blobs import BlobRef

from .conftest import MANIFEST, audit_store


def test_manifest_may_name_only_blobs_stored_with_it(tmp_path: Path) -> None:
    data = b"the problem file, as read"
    ref = BlobRef("sha256:" + hashlib.sha256(data).hexdigest(), len(data))
    manifest = {**MANIFEST, "problem": {"original": ref.as_ref()}}
    with pytest.raises(BlobMissing):
        RunStore.create(tmp_path / "refused", manifest)
    assert not (tmp_path / "refused" / "MANIFEST.json").exists()
    # The leftovers of the refused create do not make the directory a run.
    with RunStore.create(tmp_path / "refused", manifest, blobs=[data]) as store:
        assert store.read_blob(ref) == data


def test_a_stop_the_journal_cannot_hold_is_left_in_the_lock_file(tmp_path: Path) -> None:
    with RunStore.create(tmp_path / "run", MANIFEST) as store:
        store.set_session(3)
        store.mark_stopped("storage_full")
    writer = RunReader(tmp_path / "run").last_writer()
    assert writer.stopped == "storage_full" and writer.session == 3
    RunStore.open(tmp_path / "run").close()  # the next writer clears it
    assert RunReader(tmp_path / "run").last_writer().stopped is None


def test_audit_checks_the_blobs_the_manifest_names(tmp_path: Path) -> None:
    data, template = b"problem bytes", b"{{ problem }}"
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    stored = "sha256:" + hashlib.sha256(template).hexdigest()
    manifest = {
        **MANIFEST,
        "problem": {
            "original": {"blob": digest, "bytes": 13},
            "original_digest": "sha256:" + "0" * 64,
        },
        "templates": {"a.j2": stored, "b.j2": "sha256:" + "1" * 64},
    }
    RunStore.create(tmp_path / "run", manifest, blobs=[data, template]).close()
    rows = [c for c in audit_store(tmp_path / "run").checks if c.name == "references"]
    assert [(c.status, c.detail) for c in rows if c.where == "MANIFEST.json"] == [
        ("fail", "problem.original is not the blob named by problem.original_digest"),
        ("warn", "1 prompt templates are not stored in the run"),
    ]
    assert not any("no record names" in c.detail for c in rows)  # the manifest names them
