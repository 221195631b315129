"""The audit checks that need only the store's format: manifest binding, the hash chain,
blobs, references and final files (signatures are in :mod:`solver.audit.signatures`)."""

from __future__ import annotations

from solver.audit.base import AuditCheck, AuditContext, Check, capped, relative
from solver.store import iter_blob_refs
from solver.store.blobs import hash_file


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
