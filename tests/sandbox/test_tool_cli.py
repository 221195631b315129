"""`solver tool run FILE.py [--json]`: exit 0 whenever the sandbox ran the code, 7 when it
could not start, 2 for a file that is no program."""

from __future__ import annotations

import json
from pathlib import Path

from solver.errors import EXIT_INPUT, EXIT_SANDBOX
from solver.sandbox import SandboxVersion
from tests.hostile.helpers import run_cli


def test_json_carries_the_record_and_the_code_exit_is_not_ours(
    sandbox_ready: SandboxVersion, tmp_path: Path
) -> None:
    program = tmp_path / "p.py"
    program.write_text("import sys\nprint('hello')\nsys.exit(5)\n")
    outcome = run_cli(["tool", "run", str(program), "--json"])
    assert outcome.code == 0
    record = json.loads(outcome.stdout)
    assert record["stdout"] == "hello\n"
    assert record["exit"] == 5
    assert record["timed_out"] is False and record["killed_reason"] is None
    assert record["sandbox"] == sandbox_ready.as_dict()
    assert record["limits"]["cpu_s"] == 10


def test_the_configured_limits_apply(sandbox_ready: SandboxVersion, tmp_path: Path) -> None:
    config = tmp_path / "solver.toml"
    config.write_text("[sandbox]\nwall_s = 1.0\n")
    program = tmp_path / "p.py"
    program.write_text("import time\ntime.sleep(60)\n")
    outcome = run_cli(["tool", "run", str(program), "--config", str(config)])
    assert outcome.code == 0
    assert "exit None, killed: wall_time" in outcome.stderr


def test_a_missing_sandbox_is_exit_7_naming_the_install_step(tmp_path: Path) -> None:
    config = tmp_path / "solver.toml"
    config.write_text('[sandbox]\nbwrap = "/nonexistent/bwrap"\n')
    program = tmp_path / "p.py"
    program.write_text("print(1)\n")
    outcome = run_cli(["tool", "run", str(program), "--config", str(config)])
    assert outcome.code == EXIT_SANDBOX
    assert "apt-get install bubblewrap" in outcome.stderr


def test_a_file_that_is_no_program_is_bad_input(tmp_path: Path) -> None:
    assert run_cli(["tool", "run", str(tmp_path)]).code == EXIT_INPUT
    assert run_cli(["tool", "run", str(tmp_path / "missing.py")]).code == EXIT_INPUT
    binary = tmp_path / "b.py"
    binary.write_bytes(b"\xff\xfe")
    assert run_cli(["tool", "run", str(binary)]).code == EXIT_INPUT


def test_a_solve_with_tools_and_no_sandbox_stops_before_anything(tmp_path: Path) -> None:
    config = tmp_path / "solver.toml"
    config.write_text(
        '[roles.verifier]\ntools = ["python"]\n[sandbox]\nbwrap = "/nonexistent/bwrap"\n'
    )
    problem = tmp_path / "p.md"
    problem.write_text("Prove that 1 + 1 = 2.\n")
    run_dir = tmp_path / "run"
    outcome = run_cli(
        [
            "solve",
            str(problem),
            "--config",
            str(config),
            "--endpoint",
            "http://127.0.0.1:9/v1",
            "--run-dir",
            str(run_dir),
        ]
    )
    assert outcome.code == EXIT_SANDBOX
    assert "apt-get install bubblewrap" in outcome.stderr
    assert not run_dir.exists()
