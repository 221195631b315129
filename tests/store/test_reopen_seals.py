"""A signed run reopened after a kill seals the tail the killed writer left unsealed, and the
attestation it then writes names the last seal."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from solver.store import RunStore
from solver.store._fs import sha256_tag

from .conftest import MANIFEST, Keys, audit_store, failure_text
from .test_crash import in_killable_child


def killed_after(run_dir: Path, key: Path, finish: bool) -> None:
    """A signed writer that appends a few records and dies without closing."""

    def work() -> None:
        store = RunStore.create(run_dir, MANIFEST, signing_key=key)
        store.append("session.started", {"session": 1})
        store.append("step", {"n": 1})
        if finish:
            proof = store.write_final("proof.md", b"# proof\n")
            store.append(
                "run.finished", {"outcome": "solved", "final": {"proof.md": proof.as_ref()}}
            )
            store.finish_attestation({"proof.md": proof})

    assert in_killable_child("journal.fsync", 10_000, work) == 0


def types_of(run_dir: Path) -> list[str]:
    with RunStore.open(run_dir) as store:
        return [r.type for r in store.records()]


def statement(run_dir: Path) -> dict[str, Any]:
    envelope = json.loads((run_dir / "attestation.intoto.jsonl").read_bytes())
    return dict(json.loads(base64.b64decode(envelope["payload"])))


def test_reopened_signed_run_seals_the_unsealed_tail(tmp_path: Path, keys: Keys) -> None:
    run_dir = tmp_path / "run"
    killed_after(run_dir, keys.private, finish=False)
    assert types_of(run_dir)[-1] == "step"
    RunStore.open(run_dir, signing_key=keys.private).close()
    assert types_of(run_dir)[-1] == "seal"
    report = audit_store(run_dir, public_key=keys.public)
    assert report.ok, failure_text(report)
    seals = [c for c in report.checks if c.name == "seals"]
    assert seals[-1].status == "pass" and "0 records after the last seal" in seals[-1].detail


def test_finished_run_killed_before_its_attestation_gets_one_naming_the_last_seal(
    tmp_path: Path, keys: Keys
) -> None:
    run_dir = tmp_path / "run"
    killed_after(run_dir, keys.private, finish=True)
    assert not (run_dir / "attestation.intoto.jsonl").exists()
    RunStore.open(run_dir, signing_key=keys.private).close()
    assert types_of(run_dir)[-1] == "seal"
    report = audit_store(run_dir, public_key=keys.public)
    assert report.ok, failure_text(report)
    attestation = [c for c in report.checks if c.name == "attestation"]
    assert [c.status for c in attestation] == ["pass"], attestation
    last_seal = max((run_dir / "seals").iterdir())
    byproducts = statement(run_dir)["predicate"]["runDetails"]["byproducts"]
    named = {b["name"]: "sha256:" + b["digest"]["sha256"] for b in byproducts}
    # Format 2 names the last seal by its file, with the number of seals before it.
    assert named[f"seals/{last_seal.name}"] == sha256_tag(last_seal.read_bytes())
    (entry,) = [b for b in byproducts if b["name"].startswith("seals/")]
    assert entry["annotations"]["seals"] == types_of(run_dir).count("seal")


def test_reopened_run_sealed_at_its_end_adds_no_seal(tmp_path: Path, keys: Keys) -> None:
    run_dir = tmp_path / "run"
    with RunStore.create(run_dir, MANIFEST, signing_key=keys.private) as store:
        store.append("step", {"n": 1})
    before = (run_dir / "journal.jsonl").read_bytes()
    RunStore.open(run_dir, signing_key=keys.private).close()
    assert (run_dir / "journal.jsonl").read_bytes() == before
