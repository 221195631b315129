"""RunReader: read-only access to a run directory, without the lock (for audit, status and
report). It never writes, so it can look at a run while its writer is still appending."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any, BinaryIO

from solver.store._fs import (
    MAX_JOURNAL_BYTES,
    MAX_MANIFEST_BYTES,
    check_entry,
    open_regular,
    read_regular,
    read_regular_or_empty,
)
from solver.store.blobs import BlobRef, BlobStore
from solver.store.errors import CorruptionError, NotARun, UnsafeEntry
from solver.store.journal import JournalScan, Record, TornTail, scan_journal
from solver.store.lock import WriterInfo, lock_holder, lock_info
from solver.store.manifest import format_version, manifest_digest, parse_manifest
from solver.store.models import STORE_RECORD_TYPES, store_record_model
from solver.store.run import ATTESTATION_NAME, JOURNAL_NAME, MANIFEST_NAME


class RunReader:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        if not self.run_dir.is_dir():
            raise NotARun(str(self.run_dir), "no such directory")
        self.blobs = BlobStore(self.run_dir / "blobs")
        self.torn_tail: TornTail | None = None

    @cached_property
    def manifest_bytes(self) -> bytes:
        try:
            return read_regular(self.run_dir / MANIFEST_NAME, MAX_MANIFEST_BYTES)
        except FileNotFoundError:
            raise NotARun(str(self.run_dir), "no MANIFEST.json") from None

    @cached_property
    def manifest(self) -> dict[str, Any]:
        """MANIFEST.json's content; CorruptionError (seq 0) when it does not parse."""
        try:
            return parse_manifest(self.manifest_bytes)
        except ValueError as exc:
            raise CorruptionError(0, f"MANIFEST.json: {exc}") from None

    @property
    def manifest_digest(self) -> str:
        return manifest_digest(self.manifest_bytes)

    @property
    def journal_path(self) -> Path:
        return self.run_dir / JOURNAL_NAME

    @property
    def attestation_path(self) -> Path:
        return self.run_dir / ATTESTATION_NAME

    def scan(self) -> JournalScan:
        """Every parseable record, every break of the chain, and the torn tail if any."""
        data = read_regular_or_empty(self.journal_path, MAX_JOURNAL_BYTES)
        scan = scan_journal(data, self.manifest_digest)
        self.torn_tail = scan.torn
        return scan

    def tail(self, max_bytes: int = 64 * 1024) -> list[dict[str, Any]]:
        """The journal's last whole lines within its last ``max_bytes`` bytes, parsed, for a
        quick look at a run's end (`solver runs`): not verified, and a line that does not
        parse as a JSON object is skipped. The verified records are :meth:`records`."""
        try:
            with open_regular(self.journal_path, MAX_JOURNAL_BYTES) as handle:
                size = os.fstat(handle.fileno()).st_size
                start = max(0, size - max_bytes)
                handle.seek(start)
                data = handle.read(max_bytes)
        except FileNotFoundError:
            return []
        lines = data.split(b"\n")
        if start > 0:
            lines = lines[1:]  # the first line is cut
        found: list[dict[str, Any]] = []
        for line in lines:
            try:
                value = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(value, dict):
                found.append(value)
        return found

    def records(self) -> Iterator[Record]:
        """The records in order. A torn tail is skipped (and left in ``torn_tail``); any
        other damage raises CorruptionError naming the seq, and so does a store record of a
        version this store does not read for the run's format (as the writer refuses it)."""
        scan = self.scan()
        if scan.breaks:
            first = scan.breaks[0]
            seq = first.seq if first.seq is not None else first.line
            raise CorruptionError(seq, f"journal.jsonl line {first.line}: {first.reason}")
        version = format_version(self.manifest)
        for record in scan.records:
            if record.type in STORE_RECORD_TYPES and (
                store_record_model(record.type, record.v, version) is None
            ):
                raise CorruptionError(
                    record.seq,
                    f"journal.jsonl seq {record.seq}: {record.type} v{record.v} is not a "
                    f"version this solver reads (format {self.manifest['format']}); upgrade "
                    "olympiad-solver, or run `solver audit` on the run",
                )
            yield record

    def read_blob(self, ref: BlobRef | str) -> bytes:
        return self.blobs.read(ref)

    def open_blob(self, ref: BlobRef | str) -> BinaryIO:
        return self.blobs.open(ref)

    def blob_exists(self, ref: BlobRef | str) -> bool:
        return self.blobs.exists(ref.digest if isinstance(ref, BlobRef) else ref)

    def lock_holder(self) -> WriterInfo | None:
        """The pid, host and session of a live writer, or None."""
        return lock_holder(self.run_dir)

    def last_writer(self) -> WriterInfo:
        """The lock file's content even when nobody holds it: the last writer's pid, host,
        session, and ``stopped`` when it gave up without being able to record why."""
        return lock_info(self.run_dir)

    def files_in(self, name: str) -> list[Path]:
        """The entries of a subdirectory (seals, quarantine, final), sorted. Each must be a
        regular file: a symlink or special file there is refused (UnsafeEntry), since a
        reader that opened it could block, read forever, or read outside the run."""
        directory = self.run_dir / name
        check_entry(directory, "dir")
        if not directory.is_dir():
            return []
        entries = sorted(directory.iterdir())
        for entry in entries:
            check_entry(entry, "file")
        return entries

    def run_file(self, relative: str) -> Path:
        """``run_dir/relative`` for a name a record gave, refused (UnsafeEntry) when it would
        lead out of the run: absolute, ``..``, or through a symlink."""
        parts = Path(relative).parts
        if not parts or Path(relative).is_absolute() or ".." in parts or "\0" in relative:
            raise UnsafeEntry(repr(relative)[:200], "names a file outside the run directory")
        path = self.run_dir
        for part in parts:
            path = path / part
            check_entry(path, "dir" if path != self.run_dir / relative else "file")
        return path
