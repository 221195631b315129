"""Ctrl-C during `solver eval`: the advice is to run the same eval command again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from solver.cli import eval as eval_command
from solver.errors import EXIT_INTERRUPTED


def test_an_interrupted_eval_says_to_run_the_same_eval_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def interrupted(*args: Any, **kwargs: Any) -> list[Any]:
        # what Ctrl-C does to the driving task: run_interruptibly turns it into Interrupted
        raise asyncio.CancelledError

    monkeypatch.setattr(eval_command, "drive_jobs", interrupted)
    problem = {"id": "P1", "statement": "Prove that 1 + 1 = 2.", "reference_solution": "Count."}
    set_path = tmp_path / "set.jsonl"
    set_path.write_text(json.dumps(problem) + "\n")
    config = tmp_path / "solver.toml"
    config.write_text("[timeouts]\npreflight_s = 0\n")  # the endpoint is never reached
    args = [str(set_path), "--out", str(tmp_path / "out"), "--endpoint", "http://127.0.0.1:9/v1"]
    args += ["--config", str(config)]
    result = CliRunner().invoke(eval_command.eval_group, args)
    assert result.exit_code == EXIT_INTERRUPTED, result.output
    assert "the same `solver eval` command" in result.stderr
    assert "solver resume" not in result.stderr
