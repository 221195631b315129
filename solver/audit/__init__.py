"""Offline, read-only verification of a run directory: ``solver audit RUN``.

Each check returns :class:`Check` rows (pass, warn or fail, with the file or record at
fault). The lists below are explicit: the store's checks know only the store's format; the
loop's checks (calls, isolation, prompts, network, tools) understand its records. No lock is taken
and nothing is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from solver.audit import base
from solver.audit.base import (
    AuditCheck,
    AuditContext,
    AuditReport,
    BlobHashing,
    Check,
    Status,
    list_blob_files,
    statuses,
)
from solver.audit.calls import check_call_outcomes, check_isolation
from solver.audit.credentials import check_credentials
from solver.audit.network import check_network
from solver.audit.prompts import check_prompts
from solver.audit.record_checks import check_record_types, check_records
from solver.audit.signatures import check_attestation, check_seals
from solver.audit.store_checks import GENERIC_CHECKS, check_blobs
from solver.audit.tools import check_tools
from solver.store import (
    MAX_JOURNAL_BYTES,
    RunReader,
    StoreError,
    UnsafeEntry,
    load_public_key,
    public_key_from_pem,
    read_regular_or_empty,
    scan_journal,
)

__all__ = [
    "AuditCheck",
    "AuditContext",
    "AuditReport",
    "Check",
    "Status",
    "audit_run",
    "default_checks",
    "statuses",
    "store_checks",
]

LOOP_CHECKS: tuple[AuditCheck, ...] = (
    check_record_types,
    check_call_outcomes,
    check_isolation,
    check_prompts,
    check_network,
    check_tools,
)


def store_checks() -> list[AuditCheck]:
    """The checks that need only the store's format: generic ones and signatures."""
    return [*GENERIC_CHECKS, check_records, check_credentials, check_seals, check_attestation]


def default_checks() -> list[AuditCheck]:
    """The store's checks, then the loop's."""
    return [*store_checks(), *LOOP_CHECKS]


def _run_check(check: AuditCheck, ctx: AuditContext) -> list[Check]:
    try:
        return check(ctx)
    except UnsafeEntry:
        raise  # a symlink or special file in the run: refused outright, exit 65
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
        BlobHashing(list(blob_files.values()), base.HASH_WORKERS)
        if check_blobs in selected
        else None
    )
    manifest: dict[str, Any] = {}
    manifest_error: str | None = None
    try:
        manifest = reader.manifest
    except UnsafeEntry:
        raise
    except StoreError as exc:
        manifest_error = str(exc)
    try:
        scan = reader.scan()
    except UnsafeEntry:
        raise
    except StoreError:  # the manifest is missing, so there is no genesis to chain from
        data = read_regular_or_empty(reader.journal_path, MAX_JOURNAL_BYTES)
        scan = scan_journal(data, "sha256:" + "0" * 64)
    key_source: str | None = "given" if key is not None else None
    key_error: str | None = None
    signing = manifest.get("signing")
    if key is None and isinstance(signing, dict):
        # No trusted key: check the signatures with the one the run carries, and say so.
        try:
            key, key_source = public_key_from_pem(str(signing.get("public_key"))), "run"
        except StoreError as exc:
            key_error = f"signing.public_key: {exc}"
    ctx = AuditContext(
        reader, manifest, manifest_error, scan, key, blob_files, hashing, key_source=key_source
    )
    ctx.key_error = key_error
    rows: list[Check] = []
    try:
        for check in selected:
            rows.extend(_run_check(check, ctx))
    finally:
        if ctx.hashing is not None:
            ctx.hashing.close()
    ok = not any(row.status == "fail" for row in rows)
    return AuditReport(ok=ok, run=str(run_dir), checks=rows)
