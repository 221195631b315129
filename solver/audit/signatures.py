"""The audit's signature checks: seals (signed chain heads) and the final attestation.

Without ``--key`` the envelopes are checked against the journal (count, head, run id,
subjects, the seal chain) and their signatures against the public key the manifest carries;
the report says so distinctly, since a key the run carries proves only that the run is
consistent with itself. Trust comes only from a public key the user holds out of band.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from solver.audit.base import AuditContext, Check, capped, relative
from solver.store import (
    PAYLOAD_INTOTO,
    PAYLOAD_SEAL,
    STATEMENT_TYPE,
    SignatureInvalid,
    hash_file,
    key_id,
    key_ids,
    parse_envelope,
    verify_envelope,
)

# Records the store writes on its own before any seal: they carry nothing of the run.
_BOOKKEEPING = frozenset({"run.created", "recovery.tail_truncated"})


def _head_problem(ctx: AuditContext, count: Any, head: Any, what: str) -> str | None:
    """Why ``head`` is not the hash of journal line ``count`` (1-based), or None."""
    if not isinstance(count, int) or count < 1:
        return f"{what} names no valid record count ({count!r})"
    if count > len(ctx.records):
        return (
            f"{what} covers {count} records but the journal holds {len(ctx.records)}: "
            "the journal was truncated after it"
        )
    if ctx.records[count - 1].line_hash != head:
        return (
            f"{what} signed head {head} for line {count} (seq {count - 1}), which now "
            f"hashes to {ctx.records[count - 1].line_hash}: the journal was altered"
        )
    return None


def _open_envelope(ctx: AuditContext, data: bytes, payload_type: str) -> tuple[Any, str | None]:
    """(decoded JSON payload, None) or (None, the reason it cannot be trusted)."""
    try:
        envelope, payload = parse_envelope(data)
        if envelope.payloadType != payload_type:
            return None, f"payloadType is {envelope.payloadType!r}, expected {payload_type!r}"
        if ctx.public_key is not None:
            try:
                verify_envelope(envelope, payload, ctx.public_key)
            except SignatureInvalid as exc:
                if ctx.key_source == "run":
                    return None, f"{exc}: not even the key the run itself carries signed it"
                raise
        return json.loads(payload), None
    except SignatureInvalid as exc:
        return None, str(exc)
    except ValueError as exc:
        return None, f"payload is not JSON: {exc}"


RUN_KEY_NOTE = (
    "; signatures consistent with the key the run itself carries (MANIFEST.json signing), "
    "which shows the run is self-consistent, not who made it: give --key"
)


def _not_verified_note(ctx: AuditContext) -> str:
    if ctx.key_source == "given":
        return ""
    if ctx.key_source == "run":
        return RUN_KEY_NOTE
    return "; signatures not verified (no --key given and the run carries no key)"


def _verified(ctx: AuditContext) -> bool:
    """Whether signatures were checked with a key the user gave (the only trusted case)."""
    return ctx.key_source == "given"


def check_seals(ctx: AuditContext) -> list[Check]:
    """Each seal file is a valid envelope over a head that is still in the journal, and each
    ``seal`` record names a seal file with the recorded digest."""
    name = "seals"
    rows: list[Check] = []
    run_id = ctx.manifest.get("run_id")
    files = ctx.reader.files_in("seals")
    counts: list[int] = []
    payloads: dict[str, dict[str, Any]] = {}
    for path in files:
        where = relative(ctx, path)
        payload, problem = _open_envelope(ctx, path.read_bytes(), PAYLOAD_SEAL)
        if problem is None and (not isinstance(payload, dict) or payload.get("run") != run_id):
            problem = f"seal is for run {payload.get('run') if isinstance(payload, dict) else None}"
        if problem is None:
            problem = _head_problem(ctx, payload.get("count"), payload.get("chain_head"), "seal")
        if problem is None and ctx.format_version >= 2 and "prev_seal" not in payload:
            problem = "seal names no prev_seal (format 2 chains seals)"
        if problem is not None:
            rows.append(Check(name=name, status="fail", where=where, detail=problem))
        else:
            counts.append(payload["count"])
            payloads[where] = payload
    previous: str | None = None
    for record in ctx.records:
        if record.type != "seal":
            continue
        rows.extend(_seal_chain_rows(ctx, record, previous, payloads))
        previous = str(record.data.get("sha256"))
        file = str(record.data.get("file", ""))
        path = ctx.run_dir / file
        if not path.is_file():
            rows.append(
                Check(
                    name=name,
                    status="fail",
                    where=ctx.at(record),
                    detail=f"seal file {file} is missing",
                )
            )
            continue
        if hash_file(path)[0] != record.data.get("sha256"):
            rows.append(
                Check(
                    name=name,
                    status="fail",
                    where=file,
                    detail=f"differs from the digest recorded at seq {record.seq}",
                )
            )
        problem = _head_problem(
            ctx,
            record.data.get("count"),
            record.data.get("chain_head"),
            f"seal record seq {record.seq}",
        )
        if problem is None and record.data.get("count") != record.seq:
            problem = f"seal record seq {record.seq} claims count {record.data.get('count')}"
        if problem is not None:
            rows.append(Check(name=name, status="fail", where=ctx.at(record), detail=problem))
    rows.extend(_key_hint(ctx))
    if any(row.status == "fail" for row in rows):
        return capped(name, rows)
    if not files:
        if signed(ctx) and all(r.type in _BOOKKEEPING for r in ctx.records):
            # The store seals right after record 0: a run holding nothing else was killed
            # in between, and claims nothing a seal would have covered.
            detail = "the run holds only record 0 (killed before its first seal)"
            return [*rows, Check(name=name, status="warn", detail=detail)]
        # With a key, or a manifest saying the run was signed, missing seals mean stripped.
        status = "fail" if signed(ctx) else "pass"
        return [*rows, Check(name=name, status=status, detail="the run carries no seals")]
    last = max(counts)
    after = sum(1 for r in ctx.records[last:] if r.type != "seal")
    chained = " and form one chain" if ctx.format_version >= 2 else ""
    detail = f"{len(files)} seals match the journal{chained}; {after} records after the last seal"
    status = "pass" if _verified(ctx) else "warn"
    rows.append(Check(name=name, status=status, detail=detail + _not_verified_note(ctx)))
    return rows


def _seal_chain_rows(
    ctx: AuditContext, record: Any, previous: str | None, payloads: dict[str, dict[str, Any]]
) -> list[Check]:
    """Format 2: each ``seal`` record, and the seal file it names, name the seal record
    before it (``prev_seal``: that record's ``sha256``, null for the first)."""
    if ctx.format_version < 2:
        return []
    claimed = record.data.get("prev_seal")
    if claimed != previous:
        return [
            Check(
                name="seals",
                status="fail",
                where=ctx.at(record),
                detail=f"seal names previous seal {claimed}, but the seal before it is "
                f"{previous}: a seal was removed or inserted",
            )
        ]
    payload = payloads.get(str(record.data.get("file")))
    if payload is not None and payload.get("prev_seal") != claimed:
        return [
            Check(
                name="seals",
                status="fail",
                where=str(record.data.get("file")),
                detail=f"signs previous seal {payload.get('prev_seal')}, its record {claimed}",
            )
        ]
    return []


def signed(ctx: AuditContext) -> bool:
    """Whether the run must carry seals (and, once finished, an attestation): a key was
    given to check them, or the manifest (bound to record 0) says it was signed."""
    return ctx.public_key is not None or isinstance(ctx.manifest.get("signing"), dict)


def _key_hint(ctx: AuditContext) -> list[Check]:
    signing = ctx.manifest.get("signing")
    if not isinstance(signing, dict):
        return []
    if ctx.key_error is not None:
        return [Check(name="seals", status="fail", where="MANIFEST.json", detail=ctx.key_error)]
    if ctx.public_key is None or signing.get("keyid") in key_ids(ctx.public_key):
        return []
    given = key_id(ctx.public_key)
    # The run's own key must match the id it names; a key the user gave may be another one
    # (then the signatures fail on their own), which is worth saying.
    status: Any = "fail" if ctx.key_source == "run" else "warn"
    return [
        Check(
            name="seals",
            status=status,
            where="MANIFEST.json",
            detail=f"the manifest names key {signing.get('keyid')}, not {given}",
        )
    ]


def check_attestation(ctx: AuditContext) -> list[Check]:
    """attestation.intoto.jsonl: a DSSE envelope around an in-toto Statement v1 whose
    subjects are run.finished's final artifacts and the journal head at that time."""
    name = "attestation"
    path: Path = ctx.reader.attestation_path
    if not path.is_file():
        if signed(ctx) and ctx.finished is not None:
            return [
                Check(
                    name=name,
                    status="fail",
                    where=relative(ctx, path),
                    detail=f"the run finished (seq {ctx.finished.seq}) signed, but carries "
                    "no attestation",
                )
            ]
        detail = "the run carries no attestation" + (" (not finished yet)" if signed(ctx) else "")
        return [Check(name=name, status="pass", detail=detail)]
    where = relative(ctx, path)
    lines = [line for line in path.read_bytes().splitlines() if line.strip()]
    if len(lines) != 1:
        return [
            Check(
                name=name,
                status="fail",
                where=where,
                detail=f"expected one envelope, found {len(lines)}",
            )
        ]
    statement, problem = _open_envelope(ctx, lines[0], PAYLOAD_INTOTO)
    if problem is not None:
        return [Check(name=name, status="fail", where=where, detail=problem)]
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        return [Check(name=name, status="fail", where=where, detail="not an in-toto Statement v1")]
    subjects: dict[str, str] = {}
    for subject in statement.get("subject", []):
        subjects[str(subject.get("name"))] = "sha256:" + str(
            subject.get("digest", {}).get("sha256")
        )
    rows: list[Check] = []
    journal = [n for n in subjects if n.startswith("journal.jsonl@")]
    count: int | None = None
    if len(journal) != 1:
        rows.append(
            Check(name=name, status="fail", where=where, detail="no journal.jsonl@<count> subject")
        )
    else:
        count = int(journal[0].partition("@")[2] or 0)
        problem = _head_problem(ctx, count, subjects.pop(journal[0]), "the attestation")
        if problem is not None:
            rows.append(Check(name=name, status="fail", where=where, detail=problem))
    finished = ctx.finished
    final = finished.data.get("final", {}) if finished is not None else {}
    expected = {n: link.get("blob") for n, link in final.items() if isinstance(link, dict)}
    if subjects != expected:
        rows.append(
            Check(
                name=name,
                status="fail",
                where=where,
                detail=f"subjects {sorted(subjects.items())} differ from the final "
                f"artifacts run.finished names {sorted(expected.items())}",
            )
        )
    if count is not None and ctx.format_version >= 2:
        rows.extend(_attested_seal_rows(ctx, statement, count, where))
    if rows:
        return rows
    assert count is not None
    after = len(ctx.records) - count
    if after:
        rows.append(
            Check(
                name=name,
                status="warn",
                where=f"journal.jsonl seq {count}",
                detail=f"{after} records after the attestation are not covered",
            )
        )
    status = "pass" if _verified(ctx) else "warn"
    rows.append(
        Check(
            name=name,
            status=status,
            where=where,
            detail=f"subjects match {len(expected)} final artifacts and the "
            f"journal head at {count} records" + _not_verified_note(ctx),
        )
    )
    return rows


def _attested_seal_rows(
    ctx: AuditContext, statement: dict[str, Any], count: int, where: str
) -> list[Check]:
    """Format 2: the attestation names the last seal before it by file and digest, with the
    number of seal records up to it (``annotations.seals``), so deleting seals shows."""
    seals = [r for r in ctx.records[:count] if r.type == "seal"]
    details = statement.get("predicate", {}).get("runDetails", {})
    byproducts = details.get("byproducts", []) if isinstance(details, dict) else []
    named = [
        b
        for b in byproducts
        if isinstance(b, dict) and str(b.get("name", "")).startswith("seals/seal-")
    ]
    if not seals and not named:
        return []
    last = seals[-1] if seals else None
    expected = (
        (str(last.data.get("file")), str(last.data.get("sha256")), len(seals))
        if last is not None
        else None
    )
    found = None
    if len(named) == 1:
        entry = named[0]
        digest = "sha256:" + str((entry.get("digest") or {}).get("sha256"))
        annotations = entry.get("annotations") or {}
        found = (str(entry.get("name")), digest, annotations.get("seals"))
    if found != expected:
        return [
            Check(
                name="attestation",
                status="fail",
                where=where,
                detail=f"names seals {found} but the journal up to it holds {expected} "
                "(file, digest, number of seals)",
            )
        ]
    return []
