"""Forged runs for the audit tests: a real run re-written record by record into a new,
correctly chained run, so the generic chain and blob checks pass and only the check under test
can notice what was changed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from solver.audit import audit_run
from solver.store import RunReader, RunStore

Edit = Callable[[RunStore, str, dict[str, Any]], dict[str, Any] | None]


def rewrite(
    src: Path,
    dst: Path,
    edit: Edit,
    manifest: Callable[[dict[str, Any]], dict[str, Any]] = lambda m: m,
    extra_blobs: tuple[bytes, ...] = (),
) -> Path:
    """A new, correctly chained run from ``src`` with each record passed through ``edit``
    (None drops it) and the manifest through ``manifest``."""
    reader = RunReader(src)
    # every blob goes in at creation: the manifest names some (the problem file, templates)
    blobs = [p.read_bytes() for p in (src / "blobs").rglob("*") if p.is_file()]
    blobs.extend(extra_blobs)
    new_manifest = manifest(json.loads(json.dumps(reader.manifest)))
    finals = {path.name: path.read_bytes() for path in (src / "final").iterdir()}
    with RunStore.create(dst, new_manifest, blobs=blobs) as store:
        for rec in reader.records():
            if rec.type == "run.created":
                continue
            data = edit(store, rec.type, json.loads(json.dumps(rec.data)))
            if data is not None and rec.type == "run.finished" and "result.json" in finals:
                # result.json names the journal head run.finished follows: the new one's.
                result = json.loads(finals["result.json"])
                result["journal"] = {"count": store.next_seq, "head": store.head}
                finals["result.json"] = json.dumps(result, indent=2, sort_keys=True).encode()
                ref = store.put_blob(finals["result.json"])
                data["final"]["result.json"] = {"blob": ref.digest, "bytes": ref.size}
            if data is not None:
                store.append(rec.type, data, v=rec.v)
    for name, content in finals.items():
        (dst / "final").mkdir(exist_ok=True)
        (dst / "final" / name).write_bytes(content)
    return dst


def failing(run_dir: Path, name: str) -> list[str]:
    """The failing rows of check ``name``, each with where it points."""
    report = audit_run(run_dir)
    return [
        f"{c.detail} @ {c.where}" for c in report.checks if c.name == name and c.status == "fail"
    ]
