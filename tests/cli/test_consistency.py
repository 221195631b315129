"""Issue 41, point 6: what the help, `config show`, the progress view, the outcome and the
eval's output say agree with each other and read as sentences."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from solver.cli.eval import eval_group
from solver.cli.main import main
from solver.config import Settings, default_of
from solver.evaluation import default_out_dir
from solver.loop.finish import explain, reason_code
from solver.report.model import verification_summary
from solver.report.search import VersionSearch
from solver.roles.facts import ProofFinding, VerificationFacts
from solver.testing import FakeEndpoint
from tests.evaluation.test_eval import PROBLEMS, eval_args, write_set
from tests.hostile.helpers import run_cli
from tests.loop import scripts
from tests.loop.harness import PROBLEM
from tests.report.responders import olympiad


@pytest.mark.parametrize(
    ("flag", "key"),
    [
        ("--concurrency", "concurrency"),
        ("--candidates", "candidates"),
        ("--verifications", "acceptance.verifications"),
        ("--accept", "acceptance.accepted_needed"),
    ],
)
def test_the_help_names_the_default_config_show_prints(flag: str, key: str) -> None:
    shown = json.loads(run_cli(["config", "show", "--json"]).stdout)["settings"][key]
    assert shown["source"] == "default"
    helped = " ".join(CliRunner().invoke(main, ["solve", "--help"]).output.split())
    described = helped.split(flag + " INTEGER", 1)[1].split(" --", 1)[0]
    assert f"{shown['value']})" in described, (flag, described)
    assert shown["value"] == default_of(key)


def test_concurrency_help_and_config_show_agree() -> None:
    """The one the issue found: the help said 8 while `config show` said 20."""
    table = run_cli(["config", "show"]).stdout
    (row,) = [line for line in table.splitlines() if " concurrency " in line]
    helped = " ".join(CliRunner().invoke(main, ["solve", "--help"]).output.split())
    assert f"Model calls in flight at once (default {Settings().concurrency})" in helped
    assert str(Settings().concurrency) in row


def test_the_calls_budget_says_what_it_covers() -> None:
    helped = " ".join(CliRunner().invoke(main, ["solve", "--help"]).output.split())
    assert "grading and selection after it are not counted" in helped


def result(**fields: object) -> dict[str, object]:
    return {"calls": {"total": 5, "failed": 0}, **fields}


def test_the_explanation_is_a_sentence_and_the_code_stays_for_scripts() -> None:
    accepted = result(selected={"lineage": "L1", "version": 2, "accepted": True}, score=7)
    assert reason_code(accepted) == "accepted"
    assert explain(accepted, 3) == (
        "A proof passed its verifications: L1 v2, chosen by the selector among 3 accepted "
        "proofs; the grader gave it 7/7."
    )
    partial = result(
        selected={"lineage": "L0", "version": 0, "accepted": False},
        score=None,
        budget_exhausted="call budget of 12 used",
    )
    assert reason_code(partial) == "not_accepted"
    assert explain(partial, 0) == (
        "No proof passed its verifications. The best attempt is submitted (L0 v0, not "
        "accepted); no grader gave it a grade. The search stopped early (call budget of 12 "
        "used)."
    )
    assert reason_code(result(calls={"total": 3, "failed": 3})) == "no_call_completed"
    assert reason_code(result()) == "no_proof"


def test_the_outcome_line_is_the_sentence_and_result_json_keeps_both(tmp_path: Path) -> None:
    (tmp_path / "p.md").write_text(PROBLEM)
    with FakeEndpoint(scripts.solved) as fake:
        outcome = run_cli(
            [
                "solve",
                str(tmp_path / "p.md"),
                "--endpoint",
                fake.url + "/v1",
                "--runs-dir",
                str(tmp_path / "runs"),
                "--candidates",
                "1",
                "--verifications",
                "1",
                "--accept",
                "1",
            ]
        )
    assert outcome.code == 0, outcome.stderr
    assert "A proof passed its verifications: L0 v0, the only accepted proof" in outcome.stdout
    assert "(only candidate)" not in outcome.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    written = json.loads((run_dir / "final" / "result.json").read_text())
    assert written["reason_code"] == "accepted"
    assert written["reason"] == "only candidate"  # the policy's words, as before
    assert written["explanation"].startswith("A proof passed its verifications")


def test_two_sets_of_one_name_get_their_own_default_folder(tmp_path: Path) -> None:
    first = tmp_path / "a" / "problems.json"
    second = tmp_path / "b" / "problems.json"
    assert default_out_dir(first) != default_out_dir(second)
    assert default_out_dir(first).name.startswith("problems-")
    assert default_out_dir(first) == default_out_dir(Path(os.path.relpath(first)))


def test_eval_writes_its_results_to_stdout_and_progress_to_stderr(tmp_path: Path) -> None:
    set_path = write_set(tmp_path / "set.jsonl", PROBLEMS[:1])
    with FakeEndpoint(olympiad) as fake:
        done = CliRunner().invoke(eval_group, eval_args(set_path, tmp_path / "out", fake.url))
    assert done.exit_code == 0, done.output
    assert "results:" in done.stdout and "rubric mean" in done.stdout
    assert "[1/1]" in done.stderr and "[1/1]" not in done.stdout
    assert "results:" not in done.stderr


def test_a_verifier_line_says_what_it_found() -> None:
    def finding(ident: str, severity: str) -> ProofFinding:
        return ProofFinding(id=ident, location="here", severity=severity, explanation="why")

    assert verification_summary(VerificationFacts(verdict="fail", findings=())) == (
        "fail, but no finding listed"
    )
    assert verification_summary(VerificationFacts(verdict="pass", findings=())) == "pass"
    two = (finding("F1", "critical"), finding("F2", "minor"))
    assert verification_summary(VerificationFacts(verdict="fail", findings=two)) == (
        "fail: 2 findings (1 critical, 1 minor)"
    )


def test_a_version_line_does_not_count_cancelled_calls_twice() -> None:
    entry = VersionSearch(
        lineage="L0",
        version=0,
        status="open",
        passed=1,
        failed=0,
        void=3,
        pending=0,
        cancelled=2,
        pass_rate=1.0,
        best=False,
        stage="first 2 of 5",
    )
    text = entry.summary()
    assert "1 without verdict (the call failed" in text and "2 cancelled" in text
