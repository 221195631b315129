"""The audit checks that need only the store's format: manifest binding, the hash chain,
blobs, references and final files (signatures are in :mod:`solver.audit.signatures`)."""

from __future__ import annotations

import json
from typing import Any

from solver._util.terminal import one_line
from solver.audit.base import AuditCheck, AuditContext, Check, capped, relative
from solver.store import FINAL_NAME, Record, hash_file, iter_blob_refs


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
        problem = _repair_offset_problem(ctx, record)
        if problem is not None:
            rows.append(Check(name=name, status="fail", where=ctx.at(record), detail=problem))
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


def _repair_offset_problem(ctx: AuditContext, record: Record) -> str | None:
    """Format 2: a repair is recorded where the torn bytes were cut, so the ``offset`` of a
    ``recovery.tail_truncated`` is the byte at which the first of the consecutive recovery
    records it belongs to starts (each tear of one reopen is recorded there, in a row)."""
    if ctx.format_version < 2:
        return None
    first = ctx.records.index(record)
    while first > 0 and ctx.records[first - 1].type == "recovery.tail_truncated":
        first -= 1
    start = ctx.line_offsets[first] if first < len(ctx.line_offsets) else None
    if record.data.get("offset") != start:
        return (
            f"records a tail cut at byte {record.data.get('offset')}, but the repair is "
            f"recorded at byte {start}: the quarantined file is not this journal's tail"
        )
    return None


def check_blobs(ctx: AuditContext) -> list[Check]:
    """Every file under blobs/sha256 sits at the right place and hashes to its name."""
    name = "blobs"
    rows: list[Check] = []
    total = 0
    for path, digest, size in ctx.blob_hashes():
        total += size
        if path.parent.name != path.name[:2]:
            rows.append(
                Check(
                    name=name,
                    status="fail",
                    where=relative(ctx, path),
                    detail=f"sits in blobs/sha256/{path.parent.name}/ but a blob of that name "
                    f"belongs in blobs/sha256/{path.name[:2]}/",
                )
            )
        if digest != "sha256:" + path.name:
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
        named = list(iter_blob_refs(record.data))
        if record.type == "session.started" and isinstance(record.data.get("templates"), dict):
            # the templates a resuming session brought, stored under their digests
            named += [d for d in record.data["templates"].values() if isinstance(d, str)]
        for digest in named:
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
            expected = link.get("blob") if isinstance(link, dict) else None
            if not FINAL_NAME.fullmatch(str(file_name)):
                # "../../etc/shadow": never opened, hashed or shown beyond its name
                rows.append(
                    Check(
                        name=name,
                        status="fail",
                        where=f"seq {finished.seq}",
                        detail=f"names a final file {one_line(repr(file_name), 120)}, which "
                        "is not a plain file name inside final/",
                    )
                )
                continue
            path = ctx.reader.run_file(f"final/{file_name}")
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
    unnamed = [path for path in ctx.reader.files_in("final") if path.name not in named]
    if ctx.format_version >= 2:
        rows.extend(_final_binding_rows(ctx, finished, unnamed))
    else:
        rows.extend(
            Check(
                name=name,
                status="warn",
                where=relative(ctx, path),
                detail="a final file no run.finished record names",
            )
            for path in unnamed
        )
    if not rows:
        detail = (
            f"{len(named)} final files match seq {finished.seq}"
            if finished is not None
            else "run not finished: no final artifacts to check"
        )
        rows.append(Check(name=name, status="pass", detail=detail))
    return rows


def _result_of(path: Any) -> dict[str, Any]:
    """final/result.json's content ({} when it is missing or not a JSON object)."""
    try:
        result = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return result if isinstance(result, dict) else {}


def _journal_named_by_result(path: Any) -> tuple[Any, Any] | None:
    """(count, head) of final/result.json's ``journal``, or None when it has none."""
    journal = _result_of(path).get("journal")
    if not isinstance(journal, dict):
        return None
    return journal.get("count"), journal.get("head")


def _final_binding_rows(
    ctx: AuditContext, finished: Record | None, unnamed: list[Any]
) -> list[Check]:
    """Format 2 binds final/ and the journal's end to each other: result.json names the
    journal head that ``run.finished`` follows (its count and that record's ``prev``), and a
    file in final/ that the journal does not name fails (the journal was cut after it), except
    where result.json shows the writer was killed between final/ and ``run.finished``."""
    rows: list[Check] = []
    result = ctx.run_dir / "final" / "result.json"
    named = _journal_named_by_result(result) if result.is_file() else None
    final = finished.data.get("final") if finished is not None else None
    bound = finished is not None and isinstance(final, dict) and "result.json" in final
    outcome = _result_of(result).get("outcome") if bound else None
    if bound and finished is not None and outcome != finished.data.get("outcome"):
        rows.append(
            Check(
                name="final",
                status="fail",
                where="final/result.json",
                detail=f"outcome {outcome!r}, but run.finished (seq {finished.seq}) records "
                f"{finished.data.get('outcome')!r}",
            )
        )
    if bound and finished is not None and named != (finished.seq, finished.prev):
        rows.append(
            Check(
                name="final",
                status="fail",
                where="final/result.json",
                detail=f"names journal head {named} but run.finished is seq {finished.seq} "
                f"after {finished.prev}",
            )
        )
    for path in unnamed:
        rows.append(_unnamed_final_row(ctx, path, finished, named))
    return rows


def _unnamed_final_row(
    ctx: AuditContext, path: Any, finished: Record | None, named: tuple[Any, Any] | None
) -> Check:
    where = relative(ctx, path)
    if path.name.startswith(".") and path.name.endswith(".tmp"):
        return Check(
            name="final", status="warn", where=where, detail="leftover of an interrupted write"
        )
    if finished is None and named is None:
        return Check(
            name="final",
            status="warn",
            where=where,
            detail="a final file written before a run.finished that was never recorded "
            "(the writer was killed in between); nothing binds it",
        )
    last = ctx.records[-1] if ctx.records else None
    if finished is None and last is not None and named == (last.seq + 1, last.line_hash):
        return Check(
            name="final",
            status="warn",
            where=where,
            detail="final files written just before a run.finished that was never recorded "
            f"(the writer stopped after seq {last.seq})",
        )
    cut = (
        f"; result.json names the journal at {named[0]} records, it holds {len(ctx.records)}"
        if finished is None and named is not None
        else ""
    )
    return Check(
        name="final",
        status="fail",
        where=where,
        detail=f"a final file the journal does not name (its end was cut off, or the file was "
        f"added){cut}",
    )


GENERIC_CHECKS: tuple[AuditCheck, ...] = (
    check_manifest,
    check_chain,
    check_blobs,
    check_references,
    check_final,
)
