"""RunStore and RunReader: the writer's contract, the lock, reopening, torn tails."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from solver.errors import exit_code_for
from solver.store import (
    BlobCorrupt,
    BlobMissing,
    BlobRef,
    CorruptionError,
    LockHeld,
    NotARun,
    RunExists,
    RunReader,
    RunStore,
    StorageFull,
    StoreError,
    UnsafeEntry,
    WriterInfo,
    canonical_json,
    iter_blob_refs,
    store_record_models,
)
from solver.store.journal import parse_line
from solver.store.manifest import mask_secrets, parse_manifest, uuid7

from .conftest import (
    MANIFEST,
    Keys,
    audit_store,
    build_run,
    failure_text,
    journal_lines,
    write_lines,
)


def test_create_writes_a_canonical_masked_manifest_and_record_zero(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "r1"
    with RunStore.create(run_dir, MANIFEST) as store:
        raw = (run_dir / "MANIFEST.json").read_bytes()
        assert raw == canonical_json(json.loads(raw))
        assert b"sk-never-logged" not in raw
        assert store.manifest["config"]["api_key"] == "***"
        assert store.manifest["format"] == "solver-run/2"
        assert uuid.UUID(store.manifest["run_id"]).version == 7
        (first,) = list(store.records())
    assert first.type == "run.created" and first.seq == 0
    assert first.prev == first.data["manifest"] == store.manifest_digest
    assert RunReader(run_dir).manifest == store.manifest


def test_create_refuses_a_used_directory_but_not_crash_leftovers(tmp_path: Path) -> None:
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("mine")
    with pytest.raises(RunExists):
        RunStore.create(used, MANIFEST)
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(RunExists):
        RunStore.create(a_file, MANIFEST)
    leftover = tmp_path / "leftover"
    leftover.mkdir()
    (leftover / ".lock").write_text("")
    (leftover / ".MANIFEST.json.abc.tmp").write_text("{")
    RunStore.create(leftover, MANIFEST).close()
    assert not (leftover / ".MANIFEST.json.abc.tmp").exists()


def test_open_refuses_what_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(NotARun, match="no such directory"):
        RunStore.open(tmp_path / "missing")
    with pytest.raises(NotARun, match=r"no MANIFEST\.json"):
        RunStore.open(tmp_path)
    with pytest.raises(NotARun):
        RunReader(tmp_path / "missing")


def test_second_writer_is_refused_with_the_holders_pid_and_host(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    store = RunStore.create(run_dir, MANIFEST)
    store.set_session(3)
    with pytest.raises(LockHeld) as caught:
        RunStore.open(run_dir)
    assert caught.value.pid == os.getpid()
    assert caught.value.host == socket.gethostname()
    assert f"pid {os.getpid()}" in str(caught.value)
    assert exit_code_for(caught.value) == 75
    assert RunReader(run_dir).lock_holder() == WriterInfo(os.getpid(), socket.gethostname(), 3)
    store.close()
    store.close()  # closing twice is harmless
    assert RunReader(run_dir).lock_holder() is None
    (run_dir / ".lock").unlink()
    assert RunReader(run_dir).lock_holder() is None


def test_lock_refusal_without_holder_information(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with RunStore.create(run_dir, MANIFEST):
        (run_dir / ".lock").write_text("garbage")
        with pytest.raises(LockHeld, match="unknown process") as caught:
            RunStore.open(run_dir)
    assert caught.value.pid is None


def test_append_contract(tmp_path: Path) -> None:
    with RunStore.create(tmp_path / "run", MANIFEST) as store:
        with pytest.raises(StoreError, match="reserved"):
            store.append("seal", {})
        with pytest.raises(BlobMissing, match="sha256:" + "1" * 64):
            store.append("x", {"deep": [{"ref": {"blob": "sha256:" + "1" * 64}}]})
        ref = store.put_blob(b"abc")
        record = store.append("x", {"deep": [{"ref": ref.as_ref()}]}, v=2)
        assert (record.seq, record.v, record.prev) == (1, 2, store.records().__next__().line_hash)
        assert store.head == record.line_hash and store.next_seq == 2
    with pytest.raises(StoreError, match="closed"):
        store.append("x", {})


def test_reopen_continues_the_chain_and_session(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with RunStore.create(run_dir, MANIFEST) as store:
        store.set_session(1)
        store.append("a", {})
        head = store.head
    with RunStore.open(run_dir) as store:
        assert (store.head, store.next_seq, store.session) == (head, 2, 1)
        store.set_session(2)
        store.append("b", {})
    sessions = [(r.type, r.sess) for r in RunReader(run_dir).records()]
    assert sessions == [("run.created", 0), ("a", 1), ("b", 2)]
    assert audit_store(run_dir).ok


def test_blobs_dedupe_verify_and_stream(tmp_path: Path) -> None:
    with RunStore.create(tmp_path / "run", MANIFEST) as store:
        first = store.put_blob(b"same")
        assert store.put_blob(b"same") == first
        assert store.read_blob(first) == b"same"
        with store.open_blob(first.digest) as handle:
            assert handle.read() == b"same"
        with store.blob_writer() as writer:
            writer.write(b"same")
            assert writer.commit() == first  # already present: the temp file is dropped
        with pytest.raises(StoreError, match="closed"):
            writer.write(b"more")
        with pytest.raises(StoreError, match="closed"):
            writer.commit()
        with pytest.raises(RuntimeError), store.blob_writer() as writer:
            writer.write(b"never committed")
            raise RuntimeError("stream broke")
        assert list(store.blobs.tmp.iterdir()) == []
        missing = "sha256:" + "2" * 64
        with pytest.raises(BlobMissing):
            store.read_blob(missing)
        with pytest.raises(BlobMissing):
            store.open_blob(missing)
        store.blobs.path_for(first.digest).write_bytes(b"diff")
        with pytest.raises(BlobCorrupt, match="hashes to"):
            store.read_blob(first)
    with pytest.raises(StoreError, match="not a sha256 digest"):
        BlobRef("md5:abc", 1)
    assert first.hex == first.digest.removeprefix("sha256:")


def test_journal_write_failure_leaves_no_partial_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "run"
    with RunStore.create(run_dir, MANIFEST) as store:
        before = (run_dir / "journal.jsonl").read_bytes()

        def full(fd: int) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        with monkeypatch.context() as patch:
            patch.setattr(os, "fdatasync", full)
            with pytest.raises(StorageFull):
                store.append("x", {"n": 1})
        assert (run_dir / "journal.jsonl").read_bytes() == before
        store.append("x", {"n": 2})
    assert audit_store(run_dir).ok


def test_seals_by_count_and_by_time_and_none_without_key(tmp_path: Path, keys: Keys) -> None:
    with RunStore.create(tmp_path / "plain", MANIFEST) as store:
        assert store.seal() is None
        assert store.finish_attestation({}) is None
    with RunStore.create(
        tmp_path / "timed", MANIFEST, signing_key=keys.private, seal_every=1000, seal_interval_s=0.0
    ) as store:
        store.append("a", {})
        types = [r.type for r in store.records()]
    assert types == ["run.created", "seal", "a", "seal"]
    report = audit_store(tmp_path / "timed", public_key=keys.public)
    assert report.ok and {c.status for c in report.checks} == {"pass"}, failure_text(report)


def test_final_names_must_be_plain(tmp_path: Path) -> None:
    with RunStore.create(tmp_path / "run", MANIFEST) as store:
        for bad in ("../escape", "a/b", ".hidden", ""):
            with pytest.raises(StoreError, match="plain file name"):
                store.write_final(bad, b"x")


def test_open_refuses_a_broken_chain_naming_the_seq(tmp_path: Path) -> None:
    run = build_run(tmp_path / "run")
    lines = journal_lines(run.path)
    record = json.loads(lines[2])
    record["data"]["call_id"] = "forged"
    lines[2] = canonical_json(record) + b"\n"
    write_lines(run.path, lines)
    with pytest.raises(CorruptionError) as caught:
        RunStore.open(run.path)
    assert caught.value.seq == 3 and exit_code_for(caught.value) == 65
    with pytest.raises(CorruptionError, match="seq 3"):
        list(RunReader(run.path).records())
    lines[2] = b"garbage\n"
    write_lines(run.path, lines)
    with pytest.raises(CorruptionError, match="line 2 is not a record") as caught:
        RunStore.open(run.path)
    assert caught.value.seq == 2
    with pytest.raises(CorruptionError, match="seq 2"):
        list(RunReader(run.path).records())


def test_open_refuses_an_unreadable_manifest(tmp_path: Path) -> None:
    run = build_run(tmp_path / "run")
    (run.path / "MANIFEST.json").write_text("[]")
    with pytest.raises(CorruptionError, match=r"MANIFEST\.json: not a JSON object"):
        RunStore.open(run.path)
    report = audit_store(run.path)
    assert not report.ok and report.checks[0].where == "MANIFEST.json"


def test_torn_tail_at_every_byte_offset_is_repaired(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with RunStore.create(run_dir, {}) as store:
        store.append("x", {"n": 1})
        store.append("x", {"n": 2})  # a short last line keeps this loop quick
    lines = journal_lines(run_dir)
    intact, last = b"".join(lines[:-1]), lines[-1]
    for cut in range(1, len(last)):
        (run_dir / "journal.jsonl").write_bytes(intact + last[:cut])
        for stale in (run_dir / "quarantine").glob("*"):
            stale.unlink()
        reader = RunReader(run_dir)
        assert len(list(reader.records())) == len(lines) - 1
        assert reader.torn_tail is not None and reader.torn_tail.offset == len(intact)
        with RunStore.open(run_dir) as store:
            records = list(store.records())
        assert records[-1].type == "recovery.tail_truncated"
        assert records[-1].data["bytes"] == cut and records[-1].data["offset"] == len(intact)
        assert (run_dir / records[-1].data["file"]).read_bytes() == last[:cut]
        report = audit_store(run_dir)
        assert report.ok, failure_text(report)


def test_torn_tail_of_zeros_with_a_newline_is_repaired(tmp_path: Path) -> None:
    run = build_run(tmp_path / "run")
    offset = (run.path / "journal.jsonl").stat().st_size
    with (run.path / "journal.jsonl").open("ab") as handle:
        handle.write(b"\0" * 40 + b"\n")
    report = audit_store(run.path)
    assert report.ok
    warned = [c for c in report.checks if c.name == "chain" and c.status == "warn"]
    assert warned[0].where == f"journal.jsonl byte {offset}"
    RunStore.open(run.path).close()
    last = list(RunReader(run.path).records())[-1]
    assert last.type == "recovery.tail_truncated" and last.data["bytes"] == 41


def test_line_parser_names_what_is_wrong() -> None:
    cases = {
        b"[1]": "not a JSON object",
        b'{"seq":0}': "wrong fields",
        b'{"data":{},"prev":"p","seq":"0","sess":0,"t":"t","type":"x","v":1}': "integers",
        b'{"data":[],"prev":"p","seq":0,"sess":0,"t":"t","type":"x","v":1}': "data is not",
        b"\xff": "not JSON",
    }
    for line, reason in cases.items():
        with pytest.raises(ValueError, match=reason):
            parse_line(line)


def test_manifest_helpers() -> None:
    masked = mask_secrets(
        {
            "api_key": "k",
            "tokenizer_sha256": "h",
            "max_tokens": 5,
            "list": [{"password": "p", "token": ""}],
            "pair": ("a", "b"),
        }
    )
    assert masked == {
        "api_key": "***",
        "tokenizer_sha256": "h",
        "max_tokens": 5,
        "list": [{"password": "***", "token": ""}],
        "pair": ["a", "b"],
    }
    for raw, reason in (
        (b"{", "not JSON"),
        (b"[]", "not a JSON object"),
        (b'{"format":"other/9"}', "format is"),
    ):
        with pytest.raises(ValueError, match=reason):
            parse_manifest(raw)
    assert uuid.UUID(uuid7()).variant == uuid.RFC_4122


def test_blob_refs_and_record_models() -> None:
    data = {"a": {"blob": "sha256:x"}, "b": [{"blob": "sha256:y"}, {"blob": 3}], "c": "blob"}
    assert list(iter_blob_refs(data)) == ["sha256:x", "sha256:y"]
    names = {m.model_fields["type"].default for m in store_record_models()}
    assert names == {"run.created", "seal", "recovery.tail_truncated"}
    for model in store_record_models():
        assert model.model_json_schema()["additionalProperties"] is False


def test_blob_found_on_disk_is_made_durable_before_reuse(tmp_path: Path) -> None:
    """A blob left by an earlier process (perhaps renamed but never directory-synced) is
    synced once, then reused without writing it again."""
    run_dir = tmp_path / "run"
    with RunStore.create(run_dir, MANIFEST) as store:
        ref = store.put_blob(b"from the first session")
    path = run_dir / "blobs" / "sha256" / ref.hex[:2] / ref.hex
    before = path.stat().st_ino
    with RunStore.open(run_dir) as store:
        assert store.put_blob(b"from the first session") == ref
        with store.blob_writer() as writer:
            writer.write(b"from the first session")
            assert writer.commit() == ref
        store.append("x", {"b": ref.as_ref()})
    assert path.stat().st_ino == before


def test_writer_rides_out_a_readers_lock_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "run"
    RunStore.create(run_dir, MANIFEST).close()
    probe = os.open(run_dir / ".lock", os.O_RDONLY)
    fcntl.flock(probe, fcntl.LOCK_SH)  # what RunReader.lock_holder() holds for an instant
    waits: list[float] = []

    def reader_lets_go(seconds: float) -> None:
        waits.append(seconds)
        fcntl.flock(probe, fcntl.LOCK_UN)

    monkeypatch.setattr("solver.store.lock.sleep", reader_lets_go)
    try:
        RunStore.open(run_dir).close()
    finally:
        os.close(probe)
    assert len(waits) == 1


def test_writer_in_another_process_is_named_when_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    RunStore.create(run_dir, MANIFEST).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from solver.store import RunStore\n"
            "store = RunStore.open(Path(sys.argv[1])); store.set_session(7)\n"
            "print('ready', flush=True); sys.stdin.read(); store.close()\n",
            str(run_dir),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        with pytest.raises(LockHeld) as caught:
            RunStore.open(run_dir)
        assert (caught.value.pid, caught.value.host) == (holder.pid, socket.gethostname())
        assert RunReader(run_dir).lock_holder() == WriterInfo(holder.pid, socket.gethostname(), 7)
    finally:
        holder.communicate("", timeout=60)
    assert holder.returncode == 0
    RunStore.open(run_dir).close()  # free again once the holder is gone


def test_records_beyond_what_orjson_reads_still_parse(tmp_path: Path) -> None:
    with RunStore.create(tmp_path / "run", MANIFEST) as store:
        store.append("big", {"n": 2**80})  # orjson refuses integers beyond 64 bits
        store.append("after", {})
    records = list(RunReader(tmp_path / "run").records())
    assert records[1].data["n"] == 2**80
    assert audit_store(tmp_path / "run").ok


def test_a_failed_reopen_releases_everything(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    RunStore.create(run_dir, MANIFEST).close()
    with (run_dir / "journal.jsonl").open("ab") as handle:
        handle.write(b'{"torn')
    (run_dir / "quarantine").write_text("in the way")  # a file where a folder belongs
    with pytest.raises(UnsafeEntry, match="quarantine: is not a directory"):
        RunStore.open(run_dir)
    assert RunReader(run_dir).lock_holder() is None
    (run_dir / "quarantine").unlink()
    RunStore.open(run_dir).close()


def test_open_refuses_a_store_record_of_an_unknown_version(tmp_path: Path) -> None:
    run = build_run(tmp_path / "run")
    lines = journal_lines(run.path)
    record = json.loads(lines[0])
    record["v"] = 2
    lines[0] = canonical_json(record) + b"\n"
    # re-chain the rest so only the version is wrong
    prev = "sha256:" + hashlib.sha256(lines[0][:-1]).hexdigest()
    for index in range(1, len(lines)):
        item = json.loads(lines[index])
        item["prev"] = prev
        lines[index] = canonical_json(item) + b"\n"
        prev = "sha256:" + hashlib.sha256(lines[index][:-1]).hexdigest()
    write_lines(run.path, lines)
    with pytest.raises(CorruptionError, match=r"run\.created v2 is not a version") as caught:
        RunStore.open(run.path)
    assert caught.value.seq == 0 and exit_code_for(caught.value) == 65


def test_a_lock_file_field_of_the_wrong_type_reads_as_absent(tmp_path: Path) -> None:
    """The lock file is the run's, so possibly hostile: only well-typed fields are read."""
    from solver.store.lock import lock_info

    (tmp_path / ".lock").write_text(
        json.dumps({"pid": "1", "host": 5, "session": True, "stopped": "storage_full", "x": 1})
    )
    assert lock_info(tmp_path) == WriterInfo(stopped="storage_full")
    assert lock_info(tmp_path).as_json() == {"stopped": "storage_full"}
