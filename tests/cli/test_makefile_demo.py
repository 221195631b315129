"""`make demo` solves on the local server it started, whatever the user's environment holds.

The recipe runs against a stand-in virtualenv whose `python` and `solver` only record how they
were called, so the test needs `make` but no build, model or network.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Records argv and the endpoint-related environment of every call, one JSON line each.
FAKE_SOLVER = """#!{python}
import json, os, sys
keys = {keys!r}
with open({log!r}, "a") as log:
    seen = {{k: os.environ[k] for k in keys if k in os.environ}}
    log.write(json.dumps({{"argv": sys.argv[1:], "env": seen}}) + "\\n")
if sys.argv[1:3] == ["local", "up"]:
    print("http://127.0.0.1:4321/v1")
"""

HOSTILE_ENV = {
    "SOLVER_ENDPOINT": "https://elsewhere.example/v1",
    "SOLVER_MODEL": "someone-elses-model",
    "SOLVER_API": "anthropic",
    "SOLVER_API_KEY": "sk-solver-secret",
    "OPENAI_BASE_URL": "https://api.openai.example/v1",
    "OPENAI_API_KEY": "sk-openai-secret",
    "ANTHROPIC_BASE_URL": "https://api.anthropic.example",
    "ANTHROPIC_API_KEY": "sk-ant-secret",
}


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_demo_ignores_endpoint_and_key_from_the_environment(tmp_path: Path) -> None:
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "activate").write_text("")  # the venv counts as created
    log = tmp_path / "calls.jsonl"
    python = shutil.which("python3") or "/usr/bin/python3"
    _executable(
        bin_dir / "solver",
        FAKE_SOLVER.format(python=python, keys=sorted(HOSTILE_ENV), log=str(log)),
    )
    _executable(bin_dir / "python", "#!/bin/sh\nexit 0\n")  # `pip install` stands in as done
    runs = tmp_path / "runs"
    runs.mkdir()
    venv = tmp_path / "venv"
    argv = ["make", "--no-print-directory", "-C", str(ROOT), "demo", f"VENV={venv}"]
    done = subprocess.run(
        [*argv, f"DEMO_RUNS={runs}"],
        env={**os.environ, **HOSTILE_ENV},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    solves = [call for call in calls if call["argv"][:1] == ["solve"]]
    assert len(solves) == 1
    solve = solves[0]
    # No endpoint, model, protocol or key from the environment reaches the solve: it resolves
    # the endpoint from the descriptor `solver local up` wrote.
    assert solve["env"] == {}
    assert "--endpoint" not in solve["argv"]
    assert solve["argv"][1:4] == [
        "examples/sum-of-two-odd-squares.md",
        "--config",
        "examples/demo.toml",
    ]
    assert [call["argv"][:2] for call in calls][:2] == [["local", "install"], ["local", "up"]]
