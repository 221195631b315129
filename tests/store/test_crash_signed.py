"""Signed crash matrix: a signed run killed at any step before its first periodic seal (or
audited while its writer is still running) audits without a failure, with or without the
key, because the store seals right after record 0."""

from __future__ import annotations

import functools
import shutil
import signal
from pathlib import Path

import pytest

from solver.store import RunStore

from .conftest import MANIFEST, Keys, audit_store, failure_text, journal_lines
from .test_crash import SCENARIO_POINTS, in_killable_child, reopen_and_audit


def unfinished_scenario(run_dir: Path, key: Path) -> None:
    """A signed run that is still working: the default seal period is far away, so only
    the seal written at creation covers it."""
    store = RunStore.create(run_dir, MANIFEST, signing_key=key)
    store.set_session(1)
    store.append("session.started", {"session": 1})
    prompt = store.put_blob(b"prompt template bytes")
    store.append("context.built", {"messages": prompt.as_ref()})
    with store.blob_writer() as writer:
        for _ in range(4):
            writer.write(b"y" * 4096)
        response = writer.commit()
    store.append("llm.completed", {"response": response.as_ref()})
    store.write_final("notes.md", b"# notes\n")
    # Not closed: the child exits as if killed after its last record.


def assert_audits_clean(run_dir: Path, keys: Keys) -> None:
    for public in (keys.public, None):
        report = audit_store(run_dir, public_key=public)
        assert report.ok, failure_text(report)


def test_created_signed_run_carries_a_seal_at_once(tmp_path: Path, keys: Keys) -> None:
    run_dir = tmp_path / "run"
    store = RunStore.create(run_dir, MANIFEST, signing_key=keys.private)
    try:
        types = [r.type for r in store.records()]
        assert types == ["run.created", "seal"]
        store.append("session.started", {"session": 1})
        assert_audits_clean(run_dir, keys)  # audited while the writer still holds the run
    finally:
        store.close()


@pytest.mark.parametrize("step", SCENARIO_POINTS)
def test_signed_run_killed_before_its_first_periodic_seal_audits_clean(
    step: str, tmp_path: Path, keys: Keys
) -> None:
    killed = 0
    for nth in range(1, 100):
        run_dir = tmp_path / f"{step}-{nth}"
        work = functools.partial(unfinished_scenario, run_dir, keys.private)
        signum = in_killable_child(step, nth, work)
        if signum == 0:
            break
        assert signum == signal.SIGKILL
        killed += 1
        journal = run_dir / "journal.jsonl"
        if journal.is_file() and b"\n" in journal.read_bytes():
            # The crashed run as it lies, before anything resumes it. (Killed before record
            # 0 was complete, the create itself did not finish: reopening completes it.)
            assert_audits_clean(run_dir, keys)
        reopen_and_audit(run_dir, keys)
        shutil.rmtree(run_dir)
    assert killed >= 1, f"the scenario never reached {step}"


def test_signed_run_holding_only_record_0_warns_that_it_has_no_seal(
    tmp_path: Path, keys: Keys
) -> None:
    """Killed between record 0 and the seal after it: nothing of the run was recorded, so
    the missing seal is a warning. (A stripped run that recorded more still fails:
    tests/store/test_stripped_signing.py.)"""
    run_dir = tmp_path / "run"
    RunStore.create(run_dir, MANIFEST, signing_key=keys.private).close()
    shutil.rmtree(run_dir / "seals")
    (run_dir / "journal.jsonl").write_bytes(journal_lines(run_dir)[0])
    assert_audits_clean(run_dir, keys)
    report = audit_store(run_dir, public_key=keys.public)
    seals = [c for c in report.checks if c.name == "seals"]
    assert [c.status for c in seals] == ["warn"]
    assert "before its first seal" in seals[0].detail
