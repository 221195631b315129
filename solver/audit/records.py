"""Small helpers shared by the audit checks that read the loop's records."""

from __future__ import annotations

import hashlib

from solver.audit.base import AuditContext, Check, Status
from solver.store import Record


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def read_blob(ctx: AuditContext, digest: str) -> bytes:
    return ctx.reader.read_blob(digest)


def row_about(ctx: AuditContext, name: str, status: Status, detail: str, rec: Record) -> Check:
    """One check row about one journal record."""
    return Check(name=name, status=status, detail=detail, where=ctx.at(rec))


def records_of(ctx: AuditContext, *types: str) -> list[Record]:
    return [r for r in ctx.records if r.type in types]
