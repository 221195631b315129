"""Resume after anything: kills at random moments, signals, a full disk, a lost endpoint."""

from __future__ import annotations

import json
import os
import random
import resource
import select
import signal
import socket
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from solver.store import RunReader
from solver.testing import FakeEndpoint
from tests.loop import scripts
from tests.loop.harness import audit_ok, result_of, state_of, write_problem
from tests.loop.subproc import json_lines, run, solve_args, spawn

CONFIG = """
[retry]
endpoint_wait_s = 3.0
max_attempts = 2
max_wait_s = 0.2
[timeouts]
idle_s = 20.0
first_byte_s = 20.0
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "solver.toml").write_text(CONFIG)
    write_problem(tmp_path)
    return tmp_path


def decisions(run_dir: Path) -> list[tuple[str, str | None, int | None]]:
    found = []
    for rec in RunReader(run_dir).records():
        if rec.type == "decision" and rec.data["kind"] != "budget_exhausted":
            found.append((rec.data["kind"], rec.data.get("lineage"), rec.data.get("version")))
    return sorted(found, key=repr)


def assert_nothing_paid_twice(run_dir: Path) -> None:
    completed = Counter()
    finished_calls: set[str] = set()
    for rec in RunReader(run_dir).records():
        call = rec.data.get("call_id")
        if rec.type == "llm.completed":
            completed[call] += 1
        elif rec.type == "call.completed":
            finished_calls.add(call)
        elif rec.type == "llm.started":
            assert call not in finished_calls, f"{call} issued again after it completed"
            assert completed[call] == 0, f"{call} issued again after a completed attempt"
    assert all(n == 1 for n in completed.values()), completed


def first_line(proc: subprocess.Popen[str], timeout: float) -> bool:
    """Wait for the process's first line of output: the run exists (solve) or the session
    is under way (resume). False when it ended or said nothing in time."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return bool(ready) and bool(proc.stdout.readline())


def chaos(workdir: Path, kills: int, seed: int) -> tuple[Path, int]:
    """Kill the solver at random moments inside a live session (after it has printed its
    first line, so every kill lands in a run), resume, and repeat until it finishes."""
    rng = random.Random(seed)
    run_dir = workdir / "run"
    with FakeEndpoint(scripts.slow(0.12)) as fake:
        proc = spawn(solve_args(fake.url, workdir / "odd.md", run_dir), workdir)
        done = 0
        while True:
            if done < kills and first_line(proc, 120):
                time.sleep(rng.uniform(0.0, 0.9))
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    done += 1
                    proc = spawn(["resume", str(run_dir), "--json"], workdir)
                    continue
            _out, err = proc.communicate(timeout=300)
            if proc.returncode == 0 and done >= kills:
                return run_dir, done
            if proc.returncode != 0:
                raise AssertionError(f"exit {proc.returncode}: {err[-3000:]}")
            # it finished before all kills were spent: the test needs a longer run
            raise AssertionError(f"the run finished after only {done} kills")


def uninterrupted(workdir: Path) -> Path:
    run_dir = workdir / "clean"
    with FakeEndpoint(scripts.slow_solved) as fake:
        done = run(solve_args(fake.url, workdir / "odd.md", run_dir), workdir)
    assert done.returncode == 0, done.stderr
    return run_dir


def check_chaos(workdir: Path, kills: int, seed: int) -> None:
    run_dir, done = chaos(workdir, kills, seed)
    assert done == kills
    audit_ok(run_dir)
    assert_nothing_paid_twice(run_dir)
    state = state_of(run_dir)
    assert state.sessions >= 2
    reference = uninterrupted(workdir)
    assert decisions(run_dir) == decisions(reference)
    assert result_of(run_dir)["selected"] == result_of(reference)["selected"]
    assert result_of(run_dir)["outcome"] == "solved"


def test_chaos_twenty_kills(workdir: Path) -> None:
    check_chaos(workdir, kills=20, seed=20)


@pytest.mark.long
def test_chaos_two_hundred_kills(workdir: Path) -> None:
    check_chaos(workdir, kills=200, seed=200)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_interrupts_and_resume_finishes(workdir: Path, sig: signal.Signals) -> None:
    run_dir = workdir / "run"
    with FakeEndpoint(scripts.slow(0.05)) as fake:
        proc = spawn(solve_args(fake.url, workdir / "odd.md", run_dir), workdir)
        assert proc.stdout is not None
        for line in proc.stdout:  # wait for the first call to be in flight
            if '"call.started"' in line:
                break
        os.killpg(proc.pid, sig)
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert "resume" in err
        status = run(["status", str(run_dir), "--json"], workdir)
        assert json.loads(status.stdout)["state"] == "interrupted"
        again = run(["resume", str(run_dir), "--json"], workdir)
    assert again.returncode == 0, again.stderr
    assert json_lines(again.stdout)[-1]["outcome"] == "solved"
    audit_ok(run_dir)
    assert_nothing_paid_twice(run_dir)


def test_solve_refuses_an_existing_run(workdir: Path) -> None:
    with FakeEndpoint(scripts.solved) as fake:
        first = run(solve_args(fake.url, workdir / "odd.md", workdir / "run"), workdir)
        assert first.returncode == 0, first.stderr
        again = run(solve_args(fake.url, workdir / "odd.md", workdir / "run"), workdir)
    assert again.returncode == 2
    assert "solver resume" in again.stderr
    assert "Traceback" not in again.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_endpoint_down_at_start_then_back(workdir: Path) -> None:
    # without the check before the run (a server still loading), the run is made and waits
    (workdir / "solver.toml").write_text(CONFIG + "preflight_s = 0\n")
    port = free_port()
    run_dir = workdir / "run"
    down = run(solve_args(f"http://127.0.0.1:{port}", workdir / "odd.md", run_dir), workdir)
    assert down.returncode == 3, down.stderr
    assert "solver resume" in down.stderr
    status = json.loads(run(["status", str(run_dir), "--json"], workdir).stdout)
    assert status["state"] == "waiting-for-endpoint"
    with FakeEndpoint(scripts.solved, port=port):
        again = run(["resume", str(run_dir), "--json"], workdir)
    assert again.returncode == 0, again.stderr
    audit_ok(run_dir)


@pytest.mark.parametrize(
    "gone_s", [3.0, pytest.param(180.0, marks=[pytest.mark.long, pytest.mark.timeout(900)])]
)
def test_endpoint_disappears_mid_run_and_comes_back(workdir: Path, gone_s: float) -> None:
    (workdir / "solver.toml").write_text(
        CONFIG.replace("endpoint_wait_s = 3.0", f"endpoint_wait_s = {gone_s + 120}")
    )
    port = free_port()
    run_dir = workdir / "run"
    fake = FakeEndpoint(scripts.slow(0.05), port=port).__enter__()
    proc = spawn(solve_args(fake.url, workdir / "odd.md", run_dir), workdir)
    assert proc.stdout is not None
    for line in proc.stdout:
        if '"call.finished"' in line:
            break
    fake.__exit__(None, None, None)  # the endpoint goes away ...
    time.sleep(gone_s)
    with FakeEndpoint(scripts.slow(0.01), port=port):  # ... and comes back
        _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    audit_ok(run_dir)
    assert result_of(run_dir)["outcome"] == "solved"


def test_model_change_is_refused_unless_allowed(workdir: Path) -> None:
    run_dir = workdir / "run"
    with FakeEndpoint(scripts.slow(0.05)) as fake:
        proc = spawn(solve_args(fake.url, workdir / "odd.md", run_dir), workdir)
        assert proc.stdout is not None
        for line in proc.stdout:
            if '"call.started"' in line:
                break
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        port = int(fake.url.rsplit(":", 1)[1])
    with FakeEndpoint(scripts.solved, port=port, served_model="another-model"):
        refused = run(["resume", str(run_dir)], workdir)
        assert refused.returncode == 5, refused.stderr
        assert "--allow-model-change" in refused.stderr
        allowed = run(["resume", str(run_dir), "--allow-model-change", "--json"], workdir)
    assert allowed.returncode == 0, allowed.stderr
    audit_ok(run_dir)


def _small_files() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a fatal signal
    # above what the manifest takes (about 16 kB with a long temporary path since it holds the
    # [sandbox] settings and the roles' tool settings), below a run (its journal: about 45 kB)
    resource.setrlimit(resource.RLIMIT_FSIZE, (24_000, 24_000))


def test_full_disk_stops_cleanly_and_resumes(workdir: Path) -> None:
    run_dir = workdir / "run"
    with FakeEndpoint(scripts.solved) as fake:
        full = run(solve_args(fake.url, workdir / "odd.md", run_dir), workdir, limits=_small_files)
        assert full.returncode == 74, full.stderr
        assert "Traceback" not in full.stderr
        status = json.loads(run(["status", str(run_dir), "--json"], workdir).stdout)
        assert status["state"] == "storage-full"
        again = run(["resume", str(run_dir), "--json"], workdir)
    assert again.returncode == 0, again.stderr
    audit_ok(run_dir)


def test_second_interrupt_exits_at_once_and_run_stays_resumable(workdir: Path) -> None:
    run_dir = workdir / "run"
    with FakeEndpoint(scripts.slow(0.05)) as fake:
        proc = spawn(solve_args(fake.url, workdir / "odd.md", run_dir), workdir)
        assert proc.stdout is not None
        for line in proc.stdout:
            if '"call.started"' in line:
                break
        os.killpg(proc.pid, signal.SIGINT)
        os.killpg(proc.pid, signal.SIGINT)
        proc.communicate(timeout=60)
        assert proc.returncode == 130
        again = run(["resume", str(run_dir), "--json"], workdir)
    assert again.returncode == 0, again.stderr
    audit_ok(run_dir)
    assert_nothing_paid_twice(run_dir)


def test_killed_right_after_creation_resumes_with_its_inputs(tmp_path: Path) -> None:
    import asyncio

    from solver.config import resolve_settings
    from solver.problems import load_problem
    from solver.run import start_run
    from tests.loop.harness import EVAL_PROBLEM, QuietProgress, flags_for, resume

    class Killed(Exception):
        pass

    def die(path: Path) -> None:
        raise Killed(path)

    problem_path = write_problem(tmp_path, EVAL_PROBLEM)
    with FakeEndpoint(scripts.solved) as fake:
        resolved = resolve_settings(flags=flags_for(fake, tmp_path), env={}, cwd=tmp_path)
        with pytest.raises(Killed) as killed:
            asyncio.run(
                start_run(
                    load_problem(problem_path),
                    problem_path,
                    resolved,
                    evaluation=True,
                    argv=[],
                    make_progress=QuietProgress,
                    on_created=die,
                )
            )
        run_dir = Path(str(killed.value))
        outcome = resume(run_dir, tmp_path)
    assert outcome.outcome == "solved"
    assert result_of(run_dir)["evaluation_score"] == 7
    audit_ok(run_dir)
