"""`solver status` after an endpoint lost mid-run, a crash, and what a resume shows as budget."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from solver._util.clock import seconds_between
from solver.config import resolve_settings
from solver.errors import EndpointUnavailable
from solver.run import run_status
from solver.store import RunReader
from solver.testing import FakeEndpoint
from tests.loop import scripts
from tests.loop.harness import QuietProgress, flags_for, start, write_problem
from tests.loop.subproc import json_lines, run, solve_args, spawn


def stopping_after_first_call(fake: FakeEndpoint) -> Callable[..., QuietProgress]:
    class Stopping(QuietProgress):
        def call_finished(self, call: Any) -> None:
            super().call_finished(call)
            fake.close()  # the endpoint goes away for good

    return Stopping


def test_endpoint_lost_mid_run_is_recorded_as_such(tmp_path: Path) -> None:
    problem_path = write_problem(tmp_path)
    run_dirs: list[Path] = []
    with FakeEndpoint(scripts.slow(0.05)) as fake:
        flags = flags_for(fake, tmp_path, **{"retry.endpoint_wait_s": 1.0})
        resolved = resolve_settings(flags=flags, env={}, cwd=tmp_path)
        with pytest.raises(EndpointUnavailable):
            start(
                problem_path,
                resolved,
                make_progress=stopping_after_first_call(fake),
                on_created=run_dirs.append,
            )
    ended = [r for r in RunReader(run_dirs[0]).records() if r.type == "session.ended"]
    assert [r.data["reason"] for r in ended] == ["endpoint_unavailable"]
    assert run_status(run_dirs[0])["state"] == "waiting-for-endpoint"


def test_crashed_session_counts_its_time(tmp_path: Path) -> None:
    write_problem(tmp_path)
    run_dir = tmp_path / "run"
    with FakeEndpoint(scripts.slow(0.05)) as fake:
        proc = spawn(solve_args(fake.url, tmp_path / "odd.md", run_dir), tmp_path)
        assert proc.stdout is not None
        for line in proc.stdout:
            if '"call.finished"' in line:
                break
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    info = json.loads(run(["status", str(run_dir), "--json"], tmp_path).stdout)
    assert info["state"] == "crashed"
    records = list(RunReader(run_dir).records())
    started = next(r.t for r in records if r.type == "session.started")
    expected = round(seconds_between(started, records[-1].t), 1)
    assert info["wall_s"] == expected and expected > 0


def test_resume_shows_the_runs_own_budget(tmp_path: Path) -> None:
    write_problem(tmp_path)
    run_dir = tmp_path / "run"
    with FakeEndpoint(scripts.slow(0.05)) as fake:
        args = solve_args(fake.url, tmp_path / "odd.md", run_dir, "--max-calls", "77")
        proc = spawn(args, tmp_path)
        assert proc.stdout is not None
        for line in proc.stdout:
            if '"call.started"' in line:
                break
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        again = run(["resume", str(run_dir), "--json"], tmp_path)
    assert again.returncode == 0, again.stderr
    budgets = [e["totals"]["budget"] for e in json_lines(again.stdout) if "totals" in e]
    assert budgets and all(b["calls"] == 77 for b in budgets)
