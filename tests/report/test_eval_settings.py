"""`solver eval`: the settings an evaluation directory was made with are fixed, and the
number of graders comes from the flag, the configuration file, or the eval default of 3."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from solver.commands.eval import eval_group
from tests.fakes.fake_endpoint import FakeEndpoint
from tests.report.responders import olympiad
from tests.report.test_eval import PROBLEMS, eval_args, write_set


def test_a_changed_grader_count_or_solve_setting_is_refused(tmp_path: Path) -> None:
    set_path = write_set(tmp_path / "set.jsonl", PROBLEMS[:1])
    out = tmp_path / "eval"
    with FakeEndpoint(olympiad) as fake:
        first = CliRunner().invoke(eval_group, eval_args(set_path, out, fake.url))
        assert first.exit_code == 0, first.output
        eval_json = (out / "EVAL.json").read_bytes()
        results = (out / "results.md").read_bytes()
        # FAST passes --graders 3 first; the later flag wins.
        more_graders = CliRunner().invoke(
            eval_group, eval_args(set_path, out, fake.url, "--graders", "5")
        )
        more_candidates = CliRunner().invoke(
            eval_group, eval_args(set_path, out, fake.url, "--candidates", "2")
        )
        same = CliRunner().invoke(eval_group, eval_args(set_path, out, fake.url))
    assert more_graders.exit_code == 2 and more_graders.output.count("\n") == 1
    assert "graders was 3, now 5" in more_graders.output
    assert more_candidates.exit_code == 2 and more_candidates.output.count("\n") == 1
    assert "candidates was 1, now 2" in more_candidates.output
    assert same.exit_code == 0, same.output  # the same settings continue as before
    assert (out / "EVAL.json").read_bytes() == eval_json
    assert (out / "results.md").read_bytes() == results
    assert "3 grader(s) per final proof" in results.decode()
    assert json.loads(eval_json)["settings"]["graders"] == 3
