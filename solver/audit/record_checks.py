"""Audit checks on every record's content: a known type at a known version whose data the
schema accepts, the time format, record 0 against the manifest, each blob reference's size
(secrets left unmasked are the ``credentials`` check's)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ValidationError

from solver.audit.base import AuditContext, Check, capped
from solver.records import LOOP_RECORD_ADAPTER, LOOP_RECORD_TYPES, RECORD_VERSION
from solver.store import (
    STORE_RECORD_TYPES,
    TIME_PATTERN,
    Record,
    canonical_json,
    store_record_model,
)


def _store_schema_problem(record: Record, format_version: int) -> str | None:
    """Why a store record's version or data is not one this audit knows, or None."""
    if record.type in STORE_RECORD_TYPES:
        model: type[BaseModel] | None = store_record_model(record.type, record.v, format_version)
        if model is None:
            return f"{record.type} v{record.v} is not a version this audit knows"
        try:
            model.model_validate_json(canonical_json(record.data), strict=True)
        except ValidationError as exc:
            return f"{record.type} data breaks its schema: {_first_error(exc)}"
    return None


def _loop_schema_problem(record: Record) -> str | None:
    """Why a record is of a type neither the store nor the loop knows, or of a loop type
    at an unknown version or with data its schema refuses; None when it is fine."""
    if record.type in STORE_RECORD_TYPES:
        return None
    if record.type not in LOOP_RECORD_TYPES:
        return f"unknown record type {record.type!r}"
    if record.v != RECORD_VERSION:
        return f"{record.type} v{record.v} is not a version this audit knows"
    try:
        LOOP_RECORD_ADAPTER.validate_json(
            canonical_json({**record.data, "type": record.type}), strict=True
        )
    except ValidationError as exc:
        return f"{record.type} data breaks its schema: {_first_error(exc)}"
    return None


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"][1:] or error["loc"])
    return f"{where}: {error['msg']}"


def _time_problem(t: str) -> str | None:
    if TIME_PATTERN.fullmatch(t) is None:
        return f"time {t!r} is not YYYY-MM-DDTHH:MM:SS.ffffffZ"
    try:
        datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        return f"time {t!r} is not a valid date and time"
    return None


def _record0_problem(ctx: AuditContext, record: Record) -> str | None:
    for key in ("format", "run_id"):
        if record.data.get(key) != ctx.manifest.get(key):
            return (
                f"record 0 names {key} {record.data.get(key)!r}, the manifest "
                f"{ctx.manifest.get(key)!r}"
            )
    return None


def _size_problems(ctx: AuditContext, record: Record) -> list[str]:
    """A reference ``{"blob": d, "bytes": n}`` must give the size of the blob it names."""
    problems: list[str] = []
    for link in _blob_links(record.data):
        path = ctx.blob_files.get(str(link["blob"]))
        if path is None or "bytes" not in link:
            continue  # a missing blob is the references check's finding
        size = path.stat().st_size
        if link["bytes"] != size:
            problems.append(f"names blob {link['blob']} as {link['bytes']} bytes; it has {size}")
    return problems


def _blob_links(value: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            blob = item.get("blob")
            if isinstance(blob, str) and blob.startswith("sha256:"):
                found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def check_record_types(ctx: AuditContext) -> list[Check]:
    """Every record is of a type the store or the loop knows, at a version it knows, with
    data its schema accepts (no field it forbids, none it requires missing)."""
    name = "record types"
    rows: list[Check] = []
    for record in ctx.records:
        problem = _loop_schema_problem(record)
        if problem is not None:
            rows.append(Check(name=name, status="fail", where=ctx.at(record), detail=problem))
    if not rows:
        rows.append(
            Check(
                name=name,
                status="pass",
                detail=f"{len(ctx.records)} records of known types and versions, each "
                "matching its schema",
            )
        )
    return capped(name, rows)


def check_records(ctx: AuditContext) -> list[Check]:
    """The store's rules for each record: its own record types at known versions and
    schemas, a valid time, record 0 naming the manifest's format and run id, blob sizes."""
    name = "records"
    rows: list[Check] = []
    for index, record in enumerate(ctx.records):
        problems = [
            problem
            for problem in (
                _store_schema_problem(record, ctx.format_version),
                _time_problem(record.t),
                _record0_problem(ctx, record) if index == 0 and record.seq == 0 else None,
            )
            if problem is not None
        ]
        problems.extend(_size_problems(ctx, record))
        rows.extend(
            Check(name=name, status="fail", where=ctx.at(record), detail=problem)
            for problem in problems
        )
    if not rows:
        rows.append(
            Check(
                name=name,
                status="pass",
                detail=f"{len(ctx.records)} records: valid times, record 0 names this "
                "manifest, every blob reference gives its blob's size",
            )
        )
    return capped(name, rows)
