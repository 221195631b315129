"""RunStore: the single writer of a run directory.

Layout (docs/format.md describes it for third-party verifiers)::

    MANIFEST.json  journal.jsonl  blobs/sha256/ab/<hex>  seals/  final/  quarantine/
    attestation.intoto.jsonl  .lock
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

from solver._util.clock import record_time as utc_now
from solver._util.fs import write_all
from solver.store._fs import (
    MAX_JOURNAL_BYTES,
    MAX_MANIFEST_BYTES,
    canonical_json,
    check_entry,
    crash_armed,
    crash_point,
    die,
    fsync_dir,
    make_dirs,
    read_regular,
    read_regular_or_empty,
    remove_temp_files,
    sha256_tag,
    storage_errors,
    write_atomic,
)
from solver.store.attest import (
    PAYLOAD_INTOTO,
    PAYLOAD_SEAL,
    build_statement,
    key_id,
    key_id_v1,
    load_private_key,
    public_key_pem,
    seal_payload,
    sign_envelope,
)
from solver.store.blobs import BlobRef, BlobStore, BlobWriter, iter_blob_refs
from solver.store.errors import BlobMissing, CorruptionError, NotARun, RunExists, StoreError
from solver.store.journal import Record, TornTail, parse_line, scan_journal
from solver.store.lock import LOCK_NAME, WriterLock
from solver.store.manifest import (
    format_version,
    manifest_bytes,
    manifest_digest,
    parse_manifest,
    prepare_manifest,
)
from solver.store.models import (
    STORE_RECORD_TYPES,
    RunCreated,
    Seal,
    SealV2,
    TailTruncated,
    store_record_model,
)

MANIFEST_NAME = "MANIFEST.json"
JOURNAL_NAME = "journal.jsonl"
ATTESTATION_NAME = "attestation.intoto.jsonl"
FINAL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_QUARANTINE_NAME = re.compile(r"journal\.jsonl\.(\d+)(?:\.(\d+))?\.tail")


def _durable_sync(fd: int) -> None:
    """fdatasync on Linux; macOS needs F_FULLFSYNC to reach the platter."""
    full_fsync = getattr(fcntl, "F_FULLFSYNC", None)
    if full_fsync is not None:  # pragma: no cover - macOS only
        fcntl.fcntl(fd, full_fsync)
    else:
        os.fdatasync(fd)


def _make_blob_dirs(blobs: BlobStore) -> None:
    """blobs/, blobs/sha256 and blobs/tmp, durably, before the first blob is renamed in."""
    make_dirs(blobs.tree)
    make_dirs(blobs.tmp)


def _package_version() -> str:
    try:
        return version("olympiad-solver")
    except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
        return "0.0.0+source"


def holds_only_create_leftovers(run_dir: Path) -> bool:
    """Only what a create killed before its manifest leaves (lock, blobs, temporary files):
    nothing was recorded, so the directory counts as empty and a new run may start in it."""
    leftovers = (LOCK_NAME, "blobs")
    return all(e.name in leftovers or e.name.endswith(".tmp") for e in run_dir.iterdir())


_RUN_DIRS = ("blobs", "blobs/sha256", "blobs/tmp", "seals", "final", "quarantine")
_RUN_FILES = (MANIFEST_NAME, JOURNAL_NAME, ATTESTATION_NAME, LOCK_NAME)


def check_run_entries(run_dir: Path) -> None:
    """Refuse a run whose own entries are symlinks or special files (UnsafeEntry): the
    writer would otherwise write, truncate or delete through them, outside the run."""
    for name in _RUN_DIRS:
        check_entry(run_dir / name, "dir")
    for name in _RUN_FILES:
        check_entry(run_dir / name, "file")


class RunStore:
    """The run directory's only writer, from create()/open() until close(). One thread
    appends (the loop's event loop); the lock keeps other processes out, not other threads."""

    def __init__(
        self,
        run_dir: Path,
        raw_manifest: bytes,
        lock: WriterLock,
        signing_key: Path | None,
        seal_every: int,
        seal_interval_s: float,
    ) -> None:
        self.run_dir = run_dir
        self.manifest: dict[str, Any] = parse_manifest(raw_manifest)
        self.manifest_digest = manifest_digest(raw_manifest)
        # A run keeps the format it was created in: a resumed format-1 run writes format 1.
        self.format_version = format_version(self.manifest)
        self.head = self.manifest_digest
        self.next_seq = 0
        self.session = 0
        self.blobs = BlobStore(run_dir / "blobs")
        self._lock = lock
        self._key = load_private_key(signing_key) if signing_key is not None else None
        self._seal_every = seal_every
        self._seal_interval_s = seal_interval_s
        self._since_seal = 0
        self._last_seal_time = time.monotonic()
        self._last_seal_digest: str | None = None
        self._last_seal_file: str | None = None
        self._seal_count = 0  # seal records in the journal
        self._attest: dict[str, BlobRef] | None = None  # subjects to attest at close
        self._attest_stale = False  # write the attestation at close even if it exists
        self._appended = False  # whether this writer appended anything
        self._journal = run_dir / JOURNAL_NAME
        self._fd: int | None = None
        self._size = 0
        self._verified: list[Record] | None = None
        self._verified_size = 0

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    def create(
        cls,
        run_dir: Path,
        manifest: Mapping[str, Any],
        *,
        signing_key: Path | None = None,
        seal_every: int = 256,
        seal_interval_s: float = 600.0,
        blobs: Sequence[bytes] = (),
    ) -> RunStore:
        """A new run: ``blobs`` stored, MANIFEST.json written atomically, then record 0
        (``run.created``). Every blob the manifest names must be among ``blobs``."""
        run_dir = Path(run_dir)
        if run_dir.exists() and not run_dir.is_dir():
            raise RunExists(str(run_dir))
        make_dirs(run_dir)
        lock = WriterLock(run_dir)
        lock.acquire(session=0)
        try:
            check_run_entries(run_dir)
            if not holds_only_create_leftovers(run_dir):
                raise RunExists(str(run_dir))
            store_blobs = BlobStore(run_dir / "blobs")
            _make_blob_dirs(store_blobs)
            for data in blobs:
                store_blobs.put(data)
            for digest in iter_blob_refs(manifest):
                if not store_blobs.exists(digest):
                    raise BlobMissing(digest)
            prepared = prepare_manifest(manifest)
            if signing_key is not None:
                public = load_private_key(signing_key).public_key()
                prepared.setdefault(
                    "signing", {"keyid": key_id(public), "public_key": public_key_pem(public)}
                )
            remove_temp_files(run_dir)
            raw = manifest_bytes(prepared)
            write_atomic(run_dir / MANIFEST_NAME, raw)
            store = cls(run_dir, raw, lock, signing_key, seal_every, seal_interval_s)
            store._start(b"")
        except BaseException:
            lock.release()
            raise
        return store

    @classmethod
    def open(
        cls,
        run_dir: Path,
        *,
        signing_key: Path | None = None,
        seal_every: int = 256,
        seal_interval_s: float = 600.0,
    ) -> RunStore:
        """Reopen a run to append: lock, verify the chain, repair a torn tail."""
        run_dir = Path(run_dir)
        manifest_path = run_dir / MANIFEST_NAME
        if not manifest_path.is_file():
            reason = "no such directory" if not run_dir.is_dir() else "no MANIFEST.json"
            raise NotARun(str(run_dir), reason)
        lock = WriterLock(run_dir)
        lock.acquire(session=0)
        try:
            check_run_entries(run_dir)
            raw = read_regular(manifest_path, MAX_MANIFEST_BYTES)
            try:
                store = cls(run_dir, raw, lock, signing_key, seal_every, seal_interval_s)
            except ValueError as exc:
                raise CorruptionError(0, f"MANIFEST.json: {exc}") from None
            journal = read_regular_or_empty(store._journal, MAX_JOURNAL_BYTES)
            store._start(journal)
        except BaseException:
            lock.release()
            raise
        return store

    def _start(self, journal: bytes) -> None:
        try:
            self._resume_journal(journal)
        except BaseException:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            raise

    def _resume_journal(self, journal: bytes) -> None:
        for directory in (
            self.run_dir,
            self.run_dir / "seals",
            self.run_dir / "final",
            self.run_dir / "quarantine",
        ):
            remove_temp_files(directory)
        remove_temp_files(self.blobs.tmp)
        _make_blob_dirs(self.blobs)
        scan = scan_journal(journal, self.manifest_digest)
        if scan.breaks:
            first = scan.breaks[0]
            seq = first.seq if first.seq is not None else first.line
            raise CorruptionError(seq, f"journal.jsonl line {first.line}: {first.reason}")
        for record in scan.records:
            # A writer must not append to a journal whose store records it cannot read.
            if record.type in STORE_RECORD_TYPES and (
                store_record_model(record.type, record.v, self.format_version) is None
            ):
                raise CorruptionError(
                    record.seq,
                    f"{record.type} v{record.v} is not a version this solver reads "
                    f"(format {self.manifest['format']})",
                )
        fresh = not self._journal.exists()
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
        self._fd = os.open(self._journal, flags, 0o644)
        if fresh:
            fsync_dir(self.run_dir)
        self._size = scan.good_size
        # The records just verified: the first records() after opening yields these instead
        # of parsing the journal a second time (resume folds them straight away).
        self._verified = scan.records
        self._verified_size = scan.good_size
        if scan.records:
            last = scan.records[-1]
            self.head, self.next_seq, self.session = last.line_hash, last.seq + 1, last.sess
            self._count_unsealed(scan.records)
        self._lock.update(self.session)
        if scan.torn is not None:
            self._repair(scan.torn)
        if self.next_seq == 0:  # a new run, or a create that crashed before record 0
            created = RunCreated(
                manifest=self.manifest_digest,
                format=str(self.manifest["format"]),
                run_id=str(self.manifest["run_id"]),
            )
            self._append("run.created", created.data(), 1)
            if self._key is not None:
                # A signed run carries a seal from its first moment, so an audit of a run
                # killed before its first periodic seal can tell it from a stripped one.
                self.seal()
        logged = {r.data.get("file") for r in scan.records if r.type == "recovery.tail_truncated"}
        self._log_quarantined(logged, self._size)
        self._attest_if_missing(scan.records)

    def _count_unsealed(self, records: list[Record]) -> None:
        """Take up the seal state where the last writer left it: the records after its last
        ``seal`` are unsealed (a killed writer never sealed them), and that seal is the one an
        attestation written now names."""
        self._seal_count = sum(1 for record in records if record.type == "seal")
        for index in range(len(records) - 1, -1, -1):
            if records[index].type == "seal":
                self._since_seal = len(records) - 1 - index
                digest = records[index].data.get("sha256")
                file = records[index].data.get("file")
                self._last_seal_digest = digest if isinstance(digest, str) else None
                self._last_seal_file = file if isinstance(file, str) else None
                return
        self._since_seal = len(records)

    def _attest_if_missing(self, records: list[Record]) -> None:
        """A signed run that finished but was killed before its attestation was written gets
        it when this writer closes (subjects: the last ``run.finished``'s final map). So does
        a finished run this writer appends to (a torn tail repaired after the attestation):
        the attestation is rewritten to cover the records it added."""
        if self._key is None:
            return
        self._attest_stale = not (self.run_dir / ATTESTATION_NAME).exists()
        finished = next((r for r in reversed(records) if r.type == "run.finished"), None)
        if finished is None:
            return
        final = finished.data.get("final")
        if isinstance(final, dict):
            self._attest = {
                name: BlobRef(str(link["blob"]), int(link["bytes"])) for name, link in final.items()
            }

    def _repair(self, torn: TornTail) -> None:
        """Move an incomplete last line to quarantine/, cut it off, and record both."""
        make_dirs(self.run_dir / "quarantine")
        # The same offset can tear twice (a crash while appending the recovery record);
        # quarantined bytes are never overwritten, so the second one gets its own name.
        name = f"quarantine/journal.jsonl.{torn.offset}.tail"
        extra = 1
        while (self.run_dir / name).exists() and (
            read_regular(self.run_dir / name, MAX_JOURNAL_BYTES) != torn.data
        ):
            name = f"quarantine/journal.jsonl.{torn.offset}.{extra}.tail"
            extra += 1
        write_atomic(self.run_dir / name, torn.data)
        crash_point("repair.quarantined")
        assert self._fd is not None
        os.ftruncate(self._fd, torn.offset)
        os.fsync(self._fd)
        crash_point("repair.truncated")

    def _log_quarantined(self, logged: set[Any], end: int) -> None:
        """Append a ``recovery.tail_truncated`` for each quarantined tail no record names yet
        that was cut at ``end``, where the journal now ends: the repair itself, or one a crash
        interrupted before it was recorded. A file cut anywhere else is not this journal's
        repair (someone put it there), so it is left for the audit to report, not adopted."""
        quarantine = self.run_dir / "quarantine"
        if not quarantine.is_dir():
            return
        found: list[tuple[int, Path]] = []
        for path in quarantine.iterdir():
            match = _QUARANTINE_NAME.fullmatch(path.name)
            if match is None or f"quarantine/{path.name}" in logged or not path.is_file():
                continue
            if int(match.group(1)) == end:
                found.append((int(match.group(2) or 0), path))
        for _, path in sorted(found):
            name = f"quarantine/{path.name}"
            match = _QUARANTINE_NAME.fullmatch(path.name)
            assert match is not None
            data = read_regular(path, MAX_JOURNAL_BYTES)
            record = TailTruncated(
                offset=int(match.group(1)), bytes=len(data), sha256=sha256_tag(data), file=name
            )
            self._append(record.type, record.data(), 1)

    def close(self) -> None:
        """Seal what is unsealed and write a pending attestation (with a key), close the
        journal, release the lock."""
        if self._fd is None:
            return
        try:
            if (
                self._key is not None
                and self._attest is not None
                and (self._attest_stale or self._appended or self._since_seal > 0)
            ):
                # Also records a keyless writer appended after the attestation (a torn tail
                # repaired by a resume without the key): sealed and attested now.
                self._write_attestation(self._attest)
            elif self._key is not None and self._since_seal > 0:
                self.seal()
        finally:
            os.close(self._fd)
            self._fd = None
            self._lock.release()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ blobs

    def put_blob(self, data: bytes) -> BlobRef:
        return self.blobs.put(data)

    def blob_writer(self, *, hashed: bool = True) -> BlobWriter:
        """``hashed=False`` for a caller that hashes every byte it writes and names the blob at
        ``commit(digest)`` (the model client does, while it reads the stream)."""
        return self.blobs.writer(hashed=hashed)

    def read_blob(self, ref: BlobRef | str) -> bytes:
        return self.blobs.read(ref)

    def open_blob(self, ref: BlobRef | str) -> BinaryIO:
        return self.blobs.open(ref)

    # ------------------------------------------------------------------ journal

    def mark_stopped(self, reason: str) -> None:
        """Leave ``reason`` in the lock file, for a stop the journal has no room to record
        (``solver status`` reads it); best effort, since the disk is what failed."""
        with contextlib.suppress(OSError):
            self._lock.update(self.session, stopped=reason)

    def set_session(self, n: int) -> None:
        self.session = n
        self._lock.update(n)

    def append(self, type: str, data: Mapping[str, Any], *, v: int = 1) -> Record:
        """Append one record: one write, one fsync. Every blob it names must exist."""
        if type in STORE_RECORD_TYPES:
            raise StoreError(f"record type {type!r} is reserved for the store")
        for digest in iter_blob_refs(data):
            if not self.blobs.exists(digest):
                raise BlobMissing(digest)
        record = self._append(type, dict(data), v)
        if self._key is not None and (
            self._since_seal >= self._seal_every
            or time.monotonic() - self._last_seal_time >= self._seal_interval_s
        ):
            self.seal()
        return record

    def _append(self, type_: str, data: dict[str, Any], v: int) -> Record:
        if self._fd is None:
            raise StoreError("run store is closed")
        line = canonical_json(
            {
                "data": data,
                "prev": self.head,
                "seq": self.next_seq,
                "sess": self.session,
                "t": utc_now(),
                "type": type_,
                "v": v,
            }
        )
        payload = line + b"\n"
        with storage_errors(self._journal):
            try:
                if crash_armed("journal.torn"):  # pragma: no cover - runs in killed children
                    write_all(self._fd, payload[: len(payload) // 2])
                    die()
                write_all(self._fd, payload)
                crash_point("journal.write")
                _durable_sync(self._fd)
                crash_point("journal.fsync")
            except BaseException:
                # A half-written line must not stay in front of the next record.
                os.ftruncate(self._fd, self._size)
                raise
        self._size += len(payload)
        self._appended = True
        record = parse_line(line)
        self.head = record.line_hash
        self.next_seq += 1
        self._since_seal += 1
        return record

    def records(self) -> Iterator[Record]:
        """The records written so far (this writer's view; nothing else writes the file)."""
        verified, start = self._verified, 0
        self._verified = None  # kept for one pass only: a long run's records are many
        if verified is not None:
            yield from verified
            start = self._verified_size
        with self._journal.open("rb") as handle:
            handle.seek(start)
            data = handle.read(self._size - start)
        for line in data.split(b"\n")[:-1]:
            yield parse_line(line)

    # ------------------------------------------------------------------ signing and results

    def seal(self) -> Record | None:
        """With a key: sign the chain head into seals/seal-<count>.json, then append a
        ``seal`` record naming it. Without a key: nothing (returns None)."""
        if self._key is None:
            return None
        count, head = self.next_seq, self.head
        run_id, now = str(self.manifest["run_id"]), utc_now()
        prev_seal = self._last_seal_digest
        v2 = self.format_version >= 2
        payload = (
            seal_payload(run_id, count, head, now, prev_seal)
            if v2
            else seal_payload(run_id, count, head, now)
        )
        keyid = self._keyid()
        envelope = sign_envelope(PAYLOAD_SEAL, payload, self._key, keyid)
        name = f"seals/seal-{count:08d}.json"
        make_dirs(self.run_dir / "seals")
        write_atomic(self.run_dir / name, envelope)
        digest = sha256_tag(envelope)
        fields: dict[str, Any] = {
            "count": count,
            "chain_head": head,
            "file": name,
            "sha256": digest,
            "keyid": keyid,
        }
        seal = SealV2(**fields, prev_seal=prev_seal) if v2 else Seal(**fields)
        record = self._append(seal.type, seal.data(), 2 if v2 else 1)
        self._last_seal_digest, self._last_seal_file = digest, name
        self._seal_count += 1
        self._since_seal = 0
        self._last_seal_time = time.monotonic()
        return record

    def _keyid(self) -> str:
        """The id this run names its key by: the securesystemslib id from format 2 on."""
        assert self._key is not None
        public = self._key.public_key()
        return key_id(public) if self.format_version >= 2 else key_id_v1(public)

    def write_final(self, name: str, data: bytes) -> BlobRef:
        """Store ``data`` as a blob and as the human-readable copy final/<name>."""
        if FINAL_NAME.fullmatch(name) is None or name in (".", ".."):
            raise StoreError(f"final artifact name must be a plain file name: {name!r}")
        ref = self.put_blob(data)
        make_dirs(self.run_dir / "final")
        write_atomic(self.run_dir / "final" / name, data)
        return ref

    def finish_attestation(self, subjects: Mapping[str, BlobRef]) -> Path | None:
        """With a key: attest ``subjects`` (the final artifacts) when the store closes, after
        the records that end the session and the last seal, so the attestation covers the
        whole journal. Returns the path it will be written to (None without a key)."""
        if self._key is None:
            return None
        self._attest = dict(subjects)
        return self.run_dir / ATTESTATION_NAME

    def _write_attestation(self, subjects: Mapping[str, BlobRef]) -> Path:
        """Seal what is unsealed, then write attestation.intoto.jsonl: a DSSE envelope around
        an in-toto Statement v1 whose subjects are ``subjects`` and the journal head."""
        assert self._key is not None
        if self._since_seal > 0:
            self.seal()
        statement = build_statement(
            {name: ref.digest for name, ref in subjects.items()},
            self.manifest,
            manifest_digest=self.manifest_digest,
            journal_count=self.next_seq,
            journal_head=self.head,
            last_seal=self._last_seal_digest,
            finished=utc_now(),
            version=_package_version(),
            seals=(
                (self._seal_count, self._last_seal_file)
                if self.format_version >= 2 and self._last_seal_file is not None
                else None
            ),
        )
        envelope = sign_envelope(
            PAYLOAD_INTOTO, canonical_json(statement), self._key, self._keyid()
        )
        path = self.run_dir / ATTESTATION_NAME
        write_atomic(path, envelope + b"\n")
        return path
