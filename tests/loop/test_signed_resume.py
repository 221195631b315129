"""A signed run resumed from elsewhere keeps its signing; what a finished signed run holds."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from solver.audit import audit_run
from solver.config import resolve_settings
from solver.errors import InputError, exit_code_for
from solver.roles.templates import template_source
from solver.run import resume_run
from solver.store import RunReader, generate_key_pair
from solver.testing import FakeEndpoint
from tests.loop import scripts
from tests.loop.harness import QuietProgress, flags_for, start, write_problem


class Killed(Exception):
    pass


def _die(path: Path) -> None:
    raise Killed(path)


def create_signed(tmp_path: Path, fake: FakeEndpoint, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run started with a key given by a *relative* path, killed as soon as it exists."""
    home = tmp_path / "home"
    generate_key_pair(home / "keys")
    monkeypatch.chdir(home)
    problem_path = write_problem(home)
    flags = flags_for(fake, home, signing_key="keys/solver-ed25519.key")
    resolved = resolve_settings(flags=flags, env={}, cwd=home)
    with pytest.raises(Killed) as killed:
        start(problem_path, resolved, on_created=_die)
    return (home / Path(str(killed.value))).resolve()


def resume_elsewhere(run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Resume from another directory whose configuration names no signing key."""
    other = tmp_path / "elsewhere"
    other.mkdir(exist_ok=True)
    monkeypatch.chdir(other)
    resolved = resolve_settings(env={}, cwd=other)
    assert resolved.settings.signing_key is None
    outcome = asyncio.run(
        resume_run(
            run_dir, resolved, allow_model_change=False, argv=[], make_progress=QuietProgress
        )
    )
    return outcome.outcome


def statement_of(run_dir: Path) -> dict[str, Any]:
    envelope = json.loads((run_dir / "attestation.intoto.jsonl").read_bytes())
    return dict(json.loads(base64.b64decode(envelope["payload"])))


def test_resumed_signed_run_is_sealed_and_attested_over_every_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeEndpoint(scripts.solved) as fake:
        run_dir = create_signed(tmp_path, fake, monkeypatch)
        assert resume_elsewhere(run_dir, tmp_path, monkeypatch) == "solved"
    public = tmp_path / "home" / "keys" / "solver-ed25519.pub"
    report = audit_run(run_dir, public_key=public)
    assert report.ok, [c for c in report.checks if c.status == "fail"]
    attestation = [c for c in report.checks if c.name == "attestation"]
    # Written last: after session.ended and the final seal, so it covers the whole journal.
    assert [c.status for c in attestation] == ["pass"], attestation
    records = list(RunReader(run_dir).records())
    assert [r.type for r in records[-2:]] == ["session.ended", "seal"]
    assert f"journal.jsonl@{len(records)}" in {s["name"] for s in statement_of(run_dir)["subject"]}


def test_attestation_policies_are_the_manifests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeEndpoint(scripts.solved) as fake:
        run_dir = create_signed(tmp_path, fake, monkeypatch)
        resume_elsewhere(run_dir, tmp_path, monkeypatch)
    manifest = RunReader(run_dir).manifest
    internal = statement_of(run_dir)["predicate"]["buildDefinition"]["internalParameters"]
    assert internal["policies"] == {"roles": manifest["roles"], "network": manifest["network"]}
    assert internal["policies"]["roles"]["policy"] and internal["policies"]["network"]["allow"]


def test_manifest_blobs_hold_the_problem_file_and_templates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeEndpoint(scripts.solved) as fake:
        run_dir = create_signed(tmp_path, fake, monkeypatch)
    reader = RunReader(run_dir)
    problem = reader.manifest["problem"]
    original = (tmp_path / "home" / "odd.md").read_bytes()
    assert problem["original"]["blob"] == problem["original_digest"]
    assert reader.read_blob(problem["original_digest"]) == original
    for name, digest in reader.manifest["templates"].items():
        assert reader.read_blob(digest) == template_source(name)
    # A removed problem blob is a failing reference, named at the manifest.
    reader.blobs.path_for(problem["original_digest"]).unlink()
    found = [
        c
        for c in audit_run(run_dir).checks
        if c.name == "references" and c.status == "fail" and c.where == "MANIFEST.json"
    ]
    assert found and problem["original_digest"] in found[0].detail


def test_signed_run_without_its_key_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeEndpoint(scripts.solved) as fake:
        run_dir = create_signed(tmp_path, fake, monkeypatch)
        (tmp_path / "home" / "keys" / "solver-ed25519.key").rename(tmp_path / "moved.key")
        before = (run_dir / "journal.jsonl").read_bytes()
        with pytest.raises(InputError, match="signed with key") as refused:
            resume_elsewhere(run_dir, tmp_path, monkeypatch)
    assert exit_code_for(refused.value) == 2
    assert (run_dir / "journal.jsonl").read_bytes() == before


def test_signed_run_with_another_key_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeEndpoint(scripts.solved) as fake:
        run_dir = create_signed(tmp_path, fake, monkeypatch)
        other, _public, _kid = generate_key_pair(tmp_path / "other")
        (tmp_path / "home" / "keys" / "solver-ed25519.key").unlink()
        resolved = resolve_settings(flags={"signing_key": other}, env={}, cwd=tmp_path)
        with pytest.raises(InputError, match="signed with key"):
            asyncio.run(
                resume_run(
                    run_dir,
                    resolved,
                    allow_model_change=False,
                    argv=[],
                    make_progress=QuietProgress,
                )
            )


def test_resuming_a_finished_run_changes_nothing_and_needs_no_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeEndpoint(scripts.solved) as fake:
        run_dir = create_signed(tmp_path, fake, monkeypatch)
        resume_elsewhere(run_dir, tmp_path, monkeypatch)
    files = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != ".lock"}
    # The endpoint is gone: a finished run must not probe it.
    assert resume_elsewhere(run_dir, tmp_path, monkeypatch) == "solved"
    after = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != ".lock"}
    assert after == files


def cut_after_finish(run_dir: Path) -> None:
    """The run as a kill right after ``run.finished`` leaves it: no session.ended, no final
    seal, no attestation."""
    lines = (run_dir / "journal.jsonl").read_bytes().splitlines(keepends=True)
    finished = max(i for i, line in enumerate(lines) if json.loads(line)["type"] == "run.finished")
    (run_dir / "journal.jsonl").write_bytes(b"".join(lines[: finished + 1]))
    for seal in (run_dir / "seals").iterdir():
        if json.loads(base64.b64decode(json.loads(seal.read_bytes())["payload"]))["count"] > (
            finished + 1
        ):
            seal.unlink()
    (run_dir / "attestation.intoto.jsonl").unlink()


def test_finished_signed_run_killed_before_its_attestation_gets_it_on_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeEndpoint(scripts.solved) as fake:
        run_dir = create_signed(tmp_path, fake, monkeypatch)
        resume_elsewhere(run_dir, tmp_path, monkeypatch)
    cut_after_finish(run_dir)
    public = tmp_path / "home" / "keys" / "solver-ed25519.pub"
    assert not audit_run(run_dir, public_key=public).ok
    # The endpoint is gone: finishing the attestation needs none.
    assert resume_elsewhere(run_dir, tmp_path, monkeypatch) == "solved"
    report = audit_run(run_dir, public_key=public)
    assert report.ok, [c for c in report.checks if c.status == "fail"]
    records = list(RunReader(run_dir).records())
    ended = [r for r in records if r.type == "session.ended"]
    assert ended[-1].data["reason"] == "crashed"
    assert [r.type for r in records[-3:]] == ["run.finished", "session.ended", "seal"]
    subjects = {s["name"]: s["digest"]["sha256"] for s in statement_of(run_dir)["subject"]}
    assert subjects[f"journal.jsonl@{len(records)}"] == records[-1].line_hash.removeprefix(
        "sha256:"
    )
    digest = hashlib.sha256((run_dir / "final" / "proof.md").read_bytes()).hexdigest()
    assert digest in subjects.values()


def test_finished_signed_run_whose_key_moved_resumes_to_its_outcome(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeEndpoint(scripts.solved) as fake:
        run_dir = create_signed(tmp_path, fake, monkeypatch)
        resume_elsewhere(run_dir, tmp_path, monkeypatch)
    (tmp_path / "home" / "keys" / "solver-ed25519.key").rename(tmp_path / "moved.key")
    files = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != ".lock"}
    # Nothing is left to sign: the outcome, without the key and without the endpoint.
    assert resume_elsewhere(run_dir, tmp_path, monkeypatch) == "solved"
    after = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != ".lock"}
    assert after == files


def test_finished_signed_run_missing_its_attestation_still_needs_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeEndpoint(scripts.solved) as fake:
        run_dir = create_signed(tmp_path, fake, monkeypatch)
        resume_elsewhere(run_dir, tmp_path, monkeypatch)
    cut_after_finish(run_dir)
    (tmp_path / "home" / "keys" / "solver-ed25519.key").rename(tmp_path / "moved.key")
    before = (run_dir / "journal.jsonl").read_bytes()
    with pytest.raises(InputError, match="signed with key") as refused:
        resume_elsewhere(run_dir, tmp_path, monkeypatch)
    assert exit_code_for(refused.value) == 2
    assert (run_dir / "journal.jsonl").read_bytes() == before
