"""What every audit check shares: the rows it returns, the report, and the context it reads
(the run's reader, manifest, parsed journal, trusted key and the blob hashing in flight)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import BaseModel, ConfigDict

from solver.store import FORMATS, READ_CHUNK, JournalScan, Record, RunReader, hash_file

Status = Literal["pass", "warn", "fail"]


MAX_ROWS_PER_CHECK = 20


HASH_WORKERS = max(1, min(4, os.cpu_count() or 1))


class Check(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    status: Status
    detail: str
    where: str | None = None


class AuditReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    ok: bool
    run: str
    checks: list[Check]


@dataclass
class AuditContext:
    """What every check may look at: the reader, the manifest (``{}`` when unreadable), the
    parsed records in journal order, the scan (breaks, torn tail), and the trusted key."""

    reader: RunReader
    manifest: dict[str, Any]
    manifest_error: str | None
    scan: JournalScan
    public_key: Ed25519PublicKey | None
    # Digest named by each file under blobs/sha256 (by its name, not its content).
    blob_files: dict[str, Path] = field(default_factory=dict)
    hashing: BlobHashing | None = None
    records: list[Record] = field(init=False)
    # The key signatures are checked with and where it came from: "given" (--key), "run"
    # (the manifest's own signing.public_key, proving consistency only) or None.
    key_source: str | None = None
    key_error: str | None = None  # why the key the run carries cannot be used

    def __post_init__(self) -> None:
        self.records = self.scan.records
        if self.public_key is not None and self.key_source is None:
            self.key_source = "given"
        if not self.blob_files:
            self.blob_files = list_blob_files(self.reader)

    @property
    def format_version(self) -> int:
        """The run's format (1 or 2); 2 for a manifest that cannot be read, so an unreadable
        run gets the stricter checks."""
        return FORMATS.get(str(self.manifest.get("format")), 2)

    @property
    def line_offsets(self) -> list[int]:
        return self.scan.offsets

    @property
    def run_dir(self) -> Path:
        return self.reader.run_dir

    def blob_hashes(self) -> list[tuple[Path, str, int]]:
        """(path, content digest, size) of every blob file, sorted by path."""
        if self.hashing is None:
            self.hashing = BlobHashing(list(self.blob_files.values()), HASH_WORKERS)
        return self.hashing.results()

    @cached_property
    def finished(self) -> Record | None:
        """The last ``run.finished`` record, if any."""
        return next((r for r in reversed(self.records) if r.type == "run.finished"), None)

    def at(self, record: Record) -> str:
        return f"journal.jsonl seq {record.seq}"


AuditCheck = Callable[[AuditContext], list[Check]]


def capped(name: str, rows: list[Check]) -> list[Check]:
    if len(rows) <= MAX_ROWS_PER_CHECK:
        return rows
    more = len(rows) - MAX_ROWS_PER_CHECK
    worst: Status = "fail" if any(r.status == "fail" for r in rows) else "warn"
    return [*rows[:MAX_ROWS_PER_CHECK], Check(name=name, status=worst, detail=f"{more} more")]


def relative(ctx: AuditContext, path: Path) -> str:
    return path.relative_to(ctx.run_dir).as_posix()


def list_blob_files(reader: RunReader) -> dict[str, Path]:
    return {"sha256:" + path.name: path for path in reader.blobs.iter_files()}


def _hash_blobs(paths: list[Path]) -> list[tuple[Path, str, int]]:
    buffer = bytearray(READ_CHUNK)
    return [(path, *hash_file(path, buffer)) for path in paths]


class BlobHashing:
    """Hashes blob files on a few threads from the moment it is made. The audit starts it
    before parsing the journal, so hashing and parsing overlap (hashlib releases the GIL).
    Each thread takes an interleaved share, which keeps per-file overhead out of the pool."""

    def __init__(self, paths: list[Path], workers: int) -> None:
        workers = max(1, workers)
        self._pool = ThreadPoolExecutor(max_workers=workers)
        self._futures = [
            self._pool.submit(_hash_blobs, paths[start::workers]) for start in range(workers)
        ]

    def results(self) -> list[tuple[Path, str, int]]:
        return sorted(item for future in self._futures for item in future.result())

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def statuses(rows: Iterable[Check]) -> dict[str, int]:
    counts = {"pass": 0, "warn": 0, "fail": 0}
    for row in rows:
        counts[row.status] += 1
    return counts
