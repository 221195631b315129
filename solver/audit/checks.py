"""Offline, read-only verification of a run directory: ``solver audit RUN``.

Each check returns :class:`Check` rows (pass, warn or fail, with the file or record at
fault). The generic checks here know only the store's format; checks that understand the
loop's records register themselves with :func:`register_check` from the modules named in
``EXTENSION_MODULES``, which :func:`audit_run` imports when they exist. No lock is taken and
nothing is written.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import BaseModel, ConfigDict

from solver.store import RunReader, StoreError, iter_blob_refs, load_public_key
from solver.store.blobs import READ_CHUNK, hash_file
from solver.store.journal import JournalScan, Record, scan_journal

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

    def __post_init__(self) -> None:
        self.records = self.scan.records
        if not self.blob_files:
            self.blob_files = list_blob_files(self.reader)

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
_REGISTERED: list[AuditCheck] = []
EXTENSION_MODULES = ("solver.audit.calls", "solver.audit.prompts", "solver.audit.network")


def register_check(check: AuditCheck) -> AuditCheck:
    """Add a check to every audit (use as a decorator in an extension module)."""
    if check not in _REGISTERED:
        _REGISTERED.append(check)
    return check


def capped(name: str, rows: list[Check]) -> list[Check]:
    if len(rows) <= MAX_ROWS_PER_CHECK:
        return rows
    more = len(rows) - MAX_ROWS_PER_CHECK
    worst: Status = "fail" if any(r.status == "fail" for r in rows) else "warn"
    return [*rows[:MAX_ROWS_PER_CHECK], Check(name=name, status=worst, detail=f"{more} more")]


def relative(ctx: AuditContext, path: Path) -> str:
    return path.relative_to(ctx.run_dir).as_posix()


# ---------------------------------------------------------------------- generic checks


def check_manifest(ctx: AuditContext) -> list[Check]:
    """MANIFEST.json parses and record 0 (``run.created``) is bound to its digest."""
    name = "manifest"
    if ctx.manifest_error is not None:
        return [Check(name=name, status="fail", detail=ctx.manifest_error, where="MANIFEST.json")]
    digest = ctx.reader.manifest_digest
    if not ctx.records or ctx.records[0].seq != 0:
        return [
            Check(name=name, status="fail", detail="journal has no record 0", where="journal.jsonl")
        ]
    first = ctx.records[0]
    named = first.data.get("manifest")
    if first.type != "run.created" or first.prev != digest or named != digest:
        return [
            Check(
                name=name,
                status="fail",
                where="MANIFEST.json",
                detail=f"MANIFEST.json is {digest} but record 0 names {named} (prev "
                f"{first.prev}): the manifest was replaced or belongs to another run",
            )
        ]
    return [Check(name=name, status="pass", detail=f"record 0 is bound to {digest}")]


def check_chain(ctx: AuditContext) -> list[Check]:
    """Contiguous seq from 0, every prev the hash of the line before; torn tails and
    quarantined tails are warnings, as long as each quarantine matches its record."""
    name = "chain"
    rows = [
        Check(
            name=name,
            status="fail",
            detail=b.reason,
            where=f"journal.jsonl line {b.line}" + (f" (seq {b.seq})" if b.seq is not None else ""),
        )
        for b in ctx.scan.breaks
    ]
    torn = ctx.scan.torn
    if torn is not None:
        rows.append(
            Check(
                name=name,
                status="warn",
                where=f"journal.jsonl byte {torn.offset}",
                detail=f"incomplete last line ({len(torn.data)} bytes); the next "
                "writer moves it to quarantine/",
            )
        )
    logged: set[str] = set()
    for record in ctx.records:
        if record.type != "recovery.tail_truncated":
            continue
        file = str(record.data.get("file", ""))
        logged.add(file)
        path = ctx.run_dir / file
        if not path.is_file():
            rows.append(
                Check(
                    name=name,
                    status="fail",
                    where=ctx.at(record),
                    detail=f"quarantined tail {file} is missing",
                )
            )
        elif hash_file(path)[0] != record.data.get("sha256"):
            rows.append(
                Check(
                    name=name,
                    status="fail",
                    where=file,
                    detail=f"quarantined tail differs from the digest recorded at seq {record.seq}",
                )
            )
        else:
            rows.append(
                Check(
                    name=name,
                    status="warn",
                    where=file,
                    detail=f"a torn tail of {record.data.get('bytes')} bytes was "
                    f"quarantined; repair recorded at seq {record.seq}",
                )
            )
    for path in ctx.reader.files_in("quarantine"):
        if relative(ctx, path) not in logged:
            rows.append(
                Check(
                    name=name,
                    status="warn",
                    where=relative(ctx, path),
                    detail="quarantined bytes that no record names",
                )
            )
    if not rows:
        head = ctx.records[-1].line_hash if ctx.records else "(empty)"
        rows.append(
            Check(name=name, status="pass", detail=f"{len(ctx.records)} records, head {head}")
        )
    return capped(name, rows)


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


def check_blobs(ctx: AuditContext) -> list[Check]:
    """Every file under blobs/sha256 sits at the right place and hashes to its name."""
    name = "blobs"
    rows: list[Check] = []
    total = 0
    for path, digest, size in ctx.blob_hashes():
        total += size
        if digest != "sha256:" + path.name or path.parent.name != path.name[:2]:
            rows.append(
                Check(
                    name=name,
                    status="fail",
                    where=relative(ctx, path),
                    detail=f"content hashes to {digest}, not to its name",
                )
            )
    leftovers = ctx.reader.files_in("blobs/tmp")
    if leftovers:
        rows.append(
            Check(
                name=name,
                status="warn",
                where="blobs/tmp",
                detail=f"{len(leftovers)} temporary files of an interrupted write "
                "(the writer removes them when it reopens the run)",
            )
        )
    if not rows:
        rows.append(
            Check(
                name=name,
                status="pass",
                detail=f"{len(ctx.blob_files)} blobs, {total} bytes, each hashes to its name",
            )
        )
    return capped(name, rows)


def check_references(ctx: AuditContext) -> list[Check]:
    """Every blob a record names exists; blobs no record names are a warning."""
    name = "references"
    rows: list[Check] = []
    referenced: set[str] = set()
    for record in ctx.records:
        for digest in iter_blob_refs(record.data):
            referenced.add(digest)
            if digest not in ctx.blob_files:
                rows.append(
                    Check(
                        name=name,
                        status="fail",
                        where=ctx.at(record),
                        detail=f"names blob {digest}, which is missing",
                    )
                )
    rows.extend(_manifest_blob_rows(ctx, referenced))
    unreferenced = sorted(set(ctx.blob_files) - referenced)
    if unreferenced:
        rows.append(
            Check(
                name=name,
                status="warn",
                where=relative(ctx, ctx.blob_files[unreferenced[0]]),
                detail=f"{len(unreferenced)} blobs no record names",
            )
        )
    if not rows:
        rows.append(
            Check(
                name=name, status="pass", detail=f"{len(referenced)} referenced blobs all present"
            )
        )
    return capped(name, rows)


def _manifest_blob_rows(ctx: AuditContext, referenced: set[str]) -> list[Check]:
    """Blobs the manifest names: every ``{"blob": ...}`` in it (the problem file's original
    bytes) must exist, and be the problem's ``original_digest``; the prompt templates are
    stored under manifest["templates"] (runs made before that are only warned about)."""
    rows: list[Check] = []

    def fail(detail: str) -> None:
        rows.append(Check(name="references", status="fail", where="MANIFEST.json", detail=detail))

    for digest in iter_blob_refs(ctx.manifest):
        referenced.add(digest)
        if digest not in ctx.blob_files:
            fail(f"names blob {digest}, which is missing")
    problem = ctx.manifest.get("problem")
    problem = problem if isinstance(problem, dict) else {}
    original = problem.get("original")
    if isinstance(original, dict) and original.get("blob") != problem.get("original_digest"):
        fail("problem.original is not the blob named by problem.original_digest")
    templates = ctx.manifest.get("templates")
    missing = 0
    for digest in templates.values() if isinstance(templates, dict) else []:
        referenced.add(str(digest))
        missing += str(digest) not in ctx.blob_files
    if missing:
        rows.append(
            Check(
                name="references",
                status="warn",
                where="MANIFEST.json",
                detail=f"{missing} prompt templates are not stored in the run",
            )
        )
    return rows


def check_final(ctx: AuditContext) -> list[Check]:
    """final/<name> files match the digests ``run.finished`` names."""
    name = "final"
    rows: list[Check] = []
    named: set[str] = set()
    finished = ctx.finished
    if finished is not None:
        final = finished.data.get("final", {})
        for file_name, link in sorted(final.items() if isinstance(final, dict) else []):
            named.add(file_name)
            path = ctx.run_dir / "final" / file_name
            expected = link.get("blob") if isinstance(link, dict) else None
            if not path.is_file():
                rows.append(
                    Check(
                        name=name,
                        status="fail",
                        where=f"final/{file_name}",
                        detail=f"missing; seq {finished.seq} names {expected}",
                    )
                )
                continue
            digest, size = hash_file(path)
            if digest != expected or size != link.get("bytes"):
                rows.append(
                    Check(
                        name=name,
                        status="fail",
                        where=f"final/{file_name}",
                        detail=f"is {digest} ({size} bytes) but seq {finished.seq} "
                        f"names {expected} ({link.get('bytes')} bytes)",
                    )
                )
    for path in ctx.reader.files_in("final"):
        if path.name not in named:
            rows.append(
                Check(
                    name=name,
                    status="warn",
                    where=relative(ctx, path),
                    detail="a final file no run.finished record names",
                )
            )
    if not rows:
        detail = (
            f"{len(named)} final files match seq {finished.seq}"
            if finished is not None
            else "run not finished: no final artifacts to check"
        )
        rows.append(Check(name=name, status="pass", detail=detail))
    return rows


GENERIC_CHECKS: tuple[AuditCheck, ...] = (
    check_manifest,
    check_chain,
    check_blobs,
    check_references,
    check_final,
)


def _load_extensions() -> None:
    for module in EXTENSION_MODULES:
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module)


def store_checks() -> list[AuditCheck]:
    """The checks that need only the store's format: generic ones and signatures."""
    from solver.audit.signatures import check_attestation, check_seals

    return [*GENERIC_CHECKS, check_seals, check_attestation]


def default_checks() -> list[AuditCheck]:
    """The store's checks and every registered extension check (the loop's semantics)."""
    _load_extensions()
    return [*store_checks(), *_REGISTERED]


def _run_check(check: AuditCheck, ctx: AuditContext) -> list[Check]:
    try:
        return check(ctx)
    except Exception as exc:  # a damaged run may break any assumption; report, go on
        label = getattr(check, "__name__", "check").removeprefix("check_")
        return [
            Check(
                name=label,
                status="fail",
                detail=f"check could not run: {type(exc).__name__}: {exc}",
            )
        ]


def audit_run(
    run_dir: Path,
    *,
    public_key: Path | None = None,
    checks: Sequence[AuditCheck] | None = None,
) -> AuditReport:
    """Audit ``run_dir`` offline. Raises NotARun when it is not a directory, StoreError when
    ``public_key`` cannot be read; everything wrong inside the run is a failing check."""
    reader = RunReader(run_dir)
    key = load_public_key(public_key) if public_key is not None else None
    selected = list(checks) if checks is not None else default_checks()
    blob_files = list_blob_files(reader)
    hashing = (
        BlobHashing(list(blob_files.values()), HASH_WORKERS) if check_blobs in selected else None
    )
    manifest: dict[str, Any] = {}
    manifest_error: str | None = None
    try:
        manifest = reader.manifest
    except StoreError as exc:
        manifest_error = str(exc)
    try:
        scan = reader.scan()
    except StoreError:  # the manifest is missing, so there is no genesis to chain from
        data = reader.journal_path.read_bytes() if reader.journal_path.exists() else b""
        scan = scan_journal(data, "sha256:" + "0" * 64)
    ctx = AuditContext(reader, manifest, manifest_error, scan, key, blob_files, hashing)
    rows: list[Check] = []
    try:
        for check in selected:
            rows.extend(_run_check(check, ctx))
    finally:
        if ctx.hashing is not None:
            ctx.hashing.close()
    ok = not any(row.status == "fail" for row in rows)
    return AuditReport(ok=ok, run=str(run_dir), checks=rows)


def statuses(rows: Iterable[Check]) -> dict[str, int]:
    counts = {"pass": 0, "warn": 0, "fail": 0}
    for row in rows:
        counts[row.status] += 1
    return counts
