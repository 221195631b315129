"""Run the real `solver` command in a subprocess (for kills, signals and exit codes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any


def solver_env(tmp_path: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SOLVER_", "OPENAI_", "ANTHROPIC_"))
    }
    env["SOLVER_ENDPOINT_FILE"] = str(tmp_path / "endpoint.json")  # absent unless a test writes it
    env["PYTHONUNBUFFERED"] = "1"
    return env


def spawn(args: list[str], tmp_path: Path, *, limits: Any = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "solver", *args],
        cwd=tmp_path,
        env=solver_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        preexec_fn=limits,
        start_new_session=True,
    )


def run(
    args: list[str], tmp_path: Path, timeout: float = 120, limits: Any = None
) -> subprocess.CompletedProcess[str]:
    proc = spawn(args, tmp_path, limits=limits)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(
            f"solver {args} did not finish in {timeout} s:\n{err[-2000:]}"
        ) from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def solve_args(url: str, problem: Path, run_dir: Path, *extra: str) -> list[str]:
    return [
        "solve",
        str(problem),
        "--endpoint",
        url + "/v1",
        "--run-dir",
        str(run_dir),
        "--candidates",
        "2",
        "--accept",
        "2",
        "--verifications",
        "2",
        "--json",
        *extra,
    ]


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]
