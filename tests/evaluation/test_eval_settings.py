"""`solver eval`: the settings an evaluation directory was made with are fixed, and the
number of graders comes from the flag, the configuration file, or the eval default of 3."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from solver.cli.eval import eval_group
from solver.testing import FakeEndpoint
from tests.evaluation.test_eval import PROBLEMS, eval_args, write_set
from tests.report.responders import olympiad


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


def _no_graders_flag(set_path: Path, out: Path, url: str, *extra: str) -> list[str]:
    args = eval_args(set_path, out, url, *extra)
    at = args.index("--graders")
    return args[:at] + args[at + 2 :]


def _graders_used(out: Path) -> tuple[int, list[int]]:
    data = json.loads((out / "results.json").read_text())
    used = [len(r["grader_scores"]) for p in data["problems"] for r in p["runs"]]
    return data["graders"], used


def test_graders_come_from_the_configuration_file_when_no_flag_is_given(
    tmp_path: Path,
) -> None:
    set_path = write_set(tmp_path / "set.jsonl", PROBLEMS[:1])
    config = tmp_path / "solver.toml"
    config.write_text("[grading]\nevaluation_graders = 2\n")
    with FakeEndpoint(olympiad) as fake:
        from_file = CliRunner().invoke(
            eval_group,
            _no_graders_flag(set_path, tmp_path / "a", fake.url, "--config", str(config)),
        )
        flag_wins = CliRunner().invoke(
            eval_group,
            _no_graders_flag(
                set_path, tmp_path / "b", fake.url, "--config", str(config), "--graders", "1"
            ),
        )
        neither = CliRunner().invoke(
            eval_group, _no_graders_flag(set_path, tmp_path / "c", fake.url)
        )
    assert from_file.exit_code == 0, from_file.output
    assert _graders_used(tmp_path / "a") == (2, [2])
    assert flag_wins.exit_code == 0, flag_wins.output
    assert _graders_used(tmp_path / "b") == (1, [1])
    assert neither.exit_code == 0, neither.output
    assert _graders_used(tmp_path / "c") == (3, [3])  # the eval's own default
