"""What `solver eval` writes and prints when it cannot draw the chart, or no run completed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from solver.cli.eval import eval_group
from solver.testing import FakeEndpoint
from tests.evaluation.test_eval import PROBLEMS, eval_args, write_set
from tests.report.responders import olympiad


def test_without_matplotlib_the_missing_chart_is_warned_and_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_path = write_set(tmp_path / "set.jsonl", PROBLEMS[:1])
    out = tmp_path / "eval"
    with FakeEndpoint(olympiad) as fake:
        drawn = CliRunner().invoke(eval_group, eval_args(set_path, out, fake.url))
        assert drawn.exit_code == 0, drawn.output
        assert json.loads((out / "results.json").read_text())["chart"] == "results.png"
        # A default install: `import matplotlib` fails.
        monkeypatch.setitem(sys.modules, "matplotlib", None)
        result = CliRunner().invoke(eval_group, eval_args(set_path, out, fake.url))
    assert result.exit_code == 0, result.output
    warning = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert warning == [
        "warning: no chart: matplotlib is not installed: pip install 'matplotlib>=3.8'"
    ]
    data = json.loads((out / "results.json").read_text())
    assert data["chart"] is None and "matplotlib is not installed" in data["chart_note"]
    assert not (out / "results.png").exists()  # the earlier chart is not left to mislead


def test_with_no_complete_run_no_zero_mean_is_printed(tmp_path: Path) -> None:
    set_path = write_set(tmp_path / "set.jsonl", PROBLEMS[:1])
    config = tmp_path / "solver.toml"
    # no preflight, so the run is made and fails
    config.write_text(
        "[retry]\nendpoint_wait_s = 0\nmax_attempts = 1\n[timeouts]\npreflight_s = 0\n"
    )
    # Nothing listens on port 9 of 127.0.0.1: the one run fails at once.
    args = eval_args(set_path, tmp_path / "eval", "http://127.0.0.1:9", "--config", str(config))
    result = CliRunner().invoke(eval_group, args)
    assert result.exit_code != 0
    assert "no complete run" in result.output
    assert "mean 0.00" not in result.output
    # The run is continued by the same eval command, which resumes it with the others.
    assert "solver resume" not in result.output
    assert "the same `solver eval` command" in result.output
