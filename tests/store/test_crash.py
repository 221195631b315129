"""Crash matrix: a child process killed with SIGKILL at every write, fsync and rename step
leaves a run directory that reopens (repairing a torn tail) and audits without a failure."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest

from solver.store import RunStore
from solver.store import _fs as store_fs
from solver.store._fs import CRASH_ENV, CRASH_POINTS

from .conftest import MANIFEST, Keys, audit_store, failure_text, journal_lines

SCENARIO_POINTS = [p for p in CRASH_POINTS if not p.startswith("repair.")]


def scenario(run_dir: Path, key: Path) -> None:
    """A short but complete run: every kind of write the store does, twice or more."""
    with RunStore.create(run_dir, MANIFEST, signing_key=key, seal_every=3) as store:
        store.append("session.started", {"session": 1})
        prompt = store.put_blob(b"prompt template bytes")
        store.append("context.built", {"messages": prompt.as_ref()})
        with store.blob_writer() as writer:
            for _ in range(8):
                writer.write(b"x" * 4096)
            response = writer.commit()
        store.append("llm.completed", {"response": response.as_ref()})
        store.put_blob(b"prompt template bytes")  # already present: a no-op
        proof = store.write_final("proof.md", b"# proof\n")
        store.append("run.finished", {"outcome": "solved", "final": {"proof.md": proof.as_ref()}})
        store.finish_attestation({"proof.md": proof})


def in_killable_child(step: str, nth: int, work: Callable[[], None]) -> int:
    """Run ``work`` in a forked child armed to SIGKILL itself at the nth ``step``; return
    the signal that ended it, or 0 when it finished without reaching that point."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is never written
        code = 0
        try:
            os.environ[CRASH_ENV] = f"{step}:{nth}"
            store_fs._crash_hits.clear()
            work()
        except BaseException:
            traceback.print_exc()
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return os.WTERMSIG(status)
    assert os.WEXITSTATUS(status) == 0, f"child failed at {step}:{nth}"
    return 0


def reopen_and_audit(run_dir: Path, keys: Keys) -> None:
    if (run_dir / "MANIFEST.json").is_file():
        store = RunStore.open(run_dir, signing_key=keys.private)
    else:  # killed before the manifest was durable: the directory is still "empty"
        store = RunStore.create(run_dir, MANIFEST, signing_key=keys.private)
    with store:
        store.append("session.started", {"session": 2, "reason": "resume"})
    report = audit_store(run_dir, public_key=keys.public)
    assert report.ok, failure_text(report)


@pytest.mark.parametrize("step", SCENARIO_POINTS)
def test_kill_at_every_step_reopens_and_audits_clean(step: str, tmp_path: Path, keys: Keys) -> None:
    killed = 0
    for nth in range(1, 100):
        run_dir = tmp_path / f"{step}-{nth}"
        signum = in_killable_child(step, nth, functools.partial(scenario, run_dir, keys.private))
        if signum == 0:
            break
        assert signum == signal.SIGKILL
        killed += 1
        reopen_and_audit(run_dir, keys)
        shutil.rmtree(run_dir)
    assert killed >= 1, f"the scenario never reached {step}"


def _torn_run(tmp_path: Path, keys: Keys) -> Path:
    run_dir = tmp_path / "run"
    with RunStore.create(run_dir, MANIFEST, signing_key=keys.private) as store:
        store.append("a", {"n": 1})

    def torn_append() -> None:
        with RunStore.open(run_dir, signing_key=keys.private) as store:
            store.append("b", {"n": 2})

    assert in_killable_child("journal.torn", 1, torn_append) == signal.SIGKILL
    assert not (run_dir / "journal.jsonl").read_bytes().endswith(b"\n")
    return run_dir


@pytest.mark.parametrize("step", ["repair.quarantined", "repair.truncated"])
def test_kill_during_torn_tail_repair_recovers(step: str, tmp_path: Path, keys: Keys) -> None:
    run_dir = _torn_run(tmp_path, keys)

    def repair() -> None:
        RunStore.open(run_dir, signing_key=keys.private).close()

    assert in_killable_child(step, 1, repair) == signal.SIGKILL
    reopen_and_audit(run_dir, keys)
    with RunStore.open(run_dir) as store:
        recoveries = [r for r in store.records() if r.type == "recovery.tail_truncated"]
    assert len(recoveries) == 1
    quarantined = run_dir / recoveries[0].data["file"]
    assert quarantined.read_bytes() and b"\n" not in quarantined.read_bytes()


def test_torn_write_in_a_fresh_interpreter_is_repaired(tmp_path: Path, keys: Keys) -> None:
    """The same kill in a separate Python process (not a fork of the test process)."""
    run_dir = tmp_path / "run"
    with RunStore.create(run_dir, MANIFEST) as store:
        store.append("a", {"n": 1})
    child = (
        "import sys; from pathlib import Path; from solver.store import RunStore\n"
        "store = RunStore.open(Path(sys.argv[1]))\n"
        "store.append('b', {'text': 'x' * 5000})\n"
    )
    env = {**os.environ, CRASH_ENV: "journal.torn:1"}
    result = subprocess.run([sys.executable, "-c", child, str(run_dir)], env=env, check=False)
    assert result.returncode == -signal.SIGKILL
    before = journal_lines(run_dir)
    assert not before[-1].endswith(b"\n")
    with RunStore.open(run_dir) as store:
        types = [r.type for r in store.records()]
    assert types == ["run.created", "a", "recovery.tail_truncated"]
    report = audit_store(run_dir)
    assert report.ok, failure_text(report)
    warned = [c for c in report.checks if c.name == "chain" and c.status == "warn"]
    assert (
        warned and warned[0].where == f"quarantine/journal.jsonl.{len(b''.join(before[:-1]))}.tail"
    )


def test_a_second_tear_at_the_same_offset_keeps_both_tails(tmp_path: Path, keys: Keys) -> None:
    """Killed while appending the recovery record: the journal tears again at the offset it
    was just cut to. Both torn tails stay in quarantine under their own names."""
    run_dir = _torn_run(tmp_path, keys)
    first_tail = (run_dir / "journal.jsonl").read_bytes().rsplit(b"\n", 1)[1]

    def repair() -> None:
        RunStore.open(run_dir, signing_key=keys.private).close()

    assert in_killable_child("journal.torn", 1, repair) == signal.SIGKILL
    reopen_and_audit(run_dir, keys)
    tails = sorted(p.name for p in (run_dir / "quarantine").iterdir())
    assert len(tails) == 2 and tails[0].endswith(".1.tail")
    assert first_tail in [(run_dir / "quarantine" / name).read_bytes() for name in tails]
    with RunStore.open(run_dir) as store:
        logged = {r.data["file"] for r in store.records() if r.type == "recovery.tail_truncated"}
    assert logged == {f"quarantine/{name}" for name in tails}
