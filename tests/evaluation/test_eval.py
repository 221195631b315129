"""`solver eval SET`: every problem solved N times, graded, scored, totalled; resumable."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from solver.cli.eval import eval_group
from solver.evaluation import RunScore, score_from_result, summarise
from solver.testing import FakeEndpoint, RecordedRequest
from solver.testing.fake_endpoint import Reply
from tests.loop.harness import audit_ok
from tests.loop.scripts import json_reply, role_of
from tests.report.responders import disagreeing_graders, kill_eval_when, olympiad, slow

PROBLEMS = [
    {
        "id": "P1",
        "statement": "Prove that the sum of two odd squares is never a square.",
        "reference_solution": "Squares are 0 or 1 modulo 4.",
    },
    {
        "id": "P2",
        "statement": "HARD: prove that the sum of two odd squares is not a square.",
        "reference_solution": "Squares are 0 or 1 modulo 4.",
        "grading_guidelines": "2 points for reducing modulo 4.",
    },
]
FAST = [
    "--candidates",
    "1",
    "--verifications",
    "1",
    "--accept",
    "1",
    "--max-calls",
    "8",
    "--graders",
    "3",
]


def write_set(path: Path, problems: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(p) + "\n" for p in problems))
    return path


def eval_args(set_path: Path, out: Path, url: str, *extra: str) -> list[str]:
    return [str(set_path), "--out", str(out), "--endpoint", url + "/v1", *FAST, *extra]


def finished(run_dir: Path) -> bool:
    journal = run_dir / "journal.jsonl"
    return journal.is_file() and b'"type":"run.finished"' in journal.read_bytes()


def test_eval_scores_a_set_strict_and_rubric_over_runs(tmp_path: Path) -> None:
    set_path = write_set(tmp_path / "set.jsonl", PROBLEMS)
    out = tmp_path / "eval"
    with FakeEndpoint(olympiad) as fake:
        result = CliRunner().invoke(eval_group, eval_args(set_path, out, fake.url, "--runs", "2"))
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    # P1 is repaired and graded 7 (strict 7); P2 keeps its flaw: rubric 2, strict 0.
    assert [t["rubric"] for t in data["totals"]["per_run"]] == [9, 9]
    assert [t["strict"] for t in data["totals"]["per_run"]] == [7, 7]
    assert data["totals"]["max"] == 14
    assert data["totals"]["rubric"]["mean"] == 9 and data["totals"]["rubric"]["n"] == 2
    p2 = data["problems"][1]
    assert [r["grade"] for r in p2["runs"]] == [2, 2] and p2["strict"]["max"] == 0
    assert all(len(r["grader_scores"]) == 3 for p in data["problems"] for r in p["runs"])
    markdown = (out / "results.md").read_text()
    assert "- run 1 rubric: P1 7/7 P2 2/7 total 9/14" in markdown
    assert "- run 2 strict: P1 7/7 P2 0/7 total 7/14" in markdown
    assert (out / "results.png").read_bytes()[:4] == b"\x89PNG"
    for n in (1, 2):
        for name in ("P1", "P2"):
            assert (out / name / f"run-{n}" / "final" / "result.json").is_file()


def test_graders_that_disagree_are_reconciled(tmp_path: Path) -> None:
    set_path = write_set(tmp_path / "set.jsonl", PROBLEMS[:1])
    out = tmp_path / "eval"
    with FakeEndpoint(disagreeing_graders([7, 2, 7])) as fake:
        args = eval_args(set_path, out, fake.url, "--json", "--progress-every", "0.001")
        result = CliRunner().invoke(eval_group, args)
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.output.splitlines()]
    progress = [e for e in events if e["event"] == "eval.progress"]
    assert progress and progress[-1]["running"]["P1 run 1"]["calls"] >= 1
    assert events[-1]["event"] == "eval.finished" and events[-1]["rubric"]["mean"] == 5
    run = json.loads((out / "results.json").read_text())["problems"][0]["runs"][0]
    assert sorted(run["grader_scores"]) == [2, 7, 7]
    assert run["reconciled"] is True and run["grade"] == 5  # the re-judged grades' minimum
    assert run["rubric"] == 5 and run["strict"] == 0
    assert "5/7* (0)" in (out / "results.md").read_text()


def _blind_graders(scores: list[int]) -> Callable[[RecordedRequest], Reply]:
    """``olympiad``; after the first (in-loop) grade, graders answer ``scores`` in turn."""
    turn = itertools.chain([7], itertools.cycle(scores))
    lock = threading.Lock()

    def answer(request: RecordedRequest) -> Reply:
        if role_of(request) == "grader":
            with lock:
                score = next(turn)
            return json_reply("Assessment.", {"score": score, "justification": "my view"})
        return olympiad(request)

    return answer


def test_blind_graders_that_disagree_rejudge(tmp_path: Path) -> None:
    blind = [{"id": "P1", "statement": PROBLEMS[0]["statement"]}]  # no reference, no guidelines
    set_path = write_set(tmp_path / "set.jsonl", blind)
    out = tmp_path / "eval"
    with FakeEndpoint(_blind_graders([7, 0, 7])) as fake:
        result = CliRunner().invoke(eval_group, eval_args(set_path, out, fake.url))
        rejudges = [r for r in fake.requests if role_of(r) == "rejudge"]
    assert result.exit_code == 0, result.output
    run = json.loads((out / "results.json").read_text())["problems"][0]["runs"][0]
    assert sorted(run["grader_scores"]) == [0, 7, 7]
    assert run["reconciled"] is True and run["grade"] == 5  # every grader re-judged to 5
    assert len(rejudges) == 3
    for request in rejudges:
        assert "organisers" not in request.system_text
        assert "Reference solution" not in request.user_text
        # Its own judgment and the two others', each once.
        assert request.user_text.count("my view") == 3
    audit_ok(out / "P1" / "run-1")


def test_eval_resumes_after_a_kill_without_repeating_finished_runs(tmp_path: Path) -> None:
    set_path = write_set(tmp_path / "set.jsonl", PROBLEMS)
    out = tmp_path / "eval"
    with FakeEndpoint(slow(olympiad, 0.004)) as fake:
        args = eval_args(set_path, out, fake.url, "--runs", "2", "--concurrency-problems", "2")
        runs = [out / name / f"run-{n}" for name in ("P1", "P2") for n in (1, 2)]

        def one_done_one_going() -> bool:
            done = [r for r in runs if finished(r)]
            going = [r for r in runs if (r / "journal.jsonl").is_file() and r not in done]
            return bool(done and going)

        kill_eval_when(args, one_done_one_going, "run finished")
        # Classified after the kill: a run may have finished between the look and the kill.
        done = [r for r in runs if finished(r)]
        cut = [r for r in runs if (r / "journal.jsonl").is_file() and r not in done]
        assert done and cut
        before = {r: (r / "journal.jsonl").read_bytes() for r in [*done, *cut]}

        result = CliRunner().invoke(eval_group, args)
    assert result.exit_code == 0, result.output
    for run_dir in done:
        assert (run_dir / "journal.jsonl").read_bytes() == before[run_dir]  # not touched again
    assert result.output.count("already finished") == len(done)
    for run_dir in cut:
        kept = before[run_dir][: before[run_dir].rfind(b"\n") + 1]  # its complete lines
        after = (run_dir / "journal.jsonl").read_bytes()
        assert after.startswith(kept)  # continued, not restarted
        records = [json.loads(line) for line in after.splitlines()]
        completed = [r["data"]["call_id"] for r in records if r["type"] == "call.completed"]
        assert len(completed) == len(set(completed))  # no completed call was made again
        assert records[-2]["type"] == "run.finished"
    data = json.loads((out / "results.json").read_text())
    assert [t["complete"] for t in data["totals"]["per_run"]] == [True, True]
    assert data["totals"]["rubric"]["mean"] == 9 and not data["unfinished"]


def test_eval_refuses_another_set_in_the_same_directory(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    first = write_set(tmp_path / "a.jsonl", PROBLEMS[:1])
    other = write_set(tmp_path / "b.jsonl", PROBLEMS[1:])
    with FakeEndpoint(olympiad) as fake:
        assert CliRunner().invoke(eval_group, eval_args(first, out, fake.url)).exit_code == 0
        refused = CliRunner().invoke(eval_group, eval_args(other, out, fake.url))
    assert refused.exit_code == 2
    # the set it holds, by name and content (it once read "...other input (None)")
    assert f"holds an evaluation of the set {first} (content " in refused.output
    assert "None" not in refused.output
    assert refused.output.count("\n") == 1


def test_eval_bad_set_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "set.jsonl"
    bad.write_text('{"id": "P1"}\n')
    result = CliRunner().invoke(eval_group, [str(bad), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and result.output.startswith("error:")
    assert result.output.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_scores_scale_to_points_and_a_missing_proof_scores_zero() -> None:
    result = {
        "outcome": "partial",
        "selected": {"lineage": "L0"},
        "evaluation_score": 5,
        "evaluation": {"scores": [5, 4, 6], "reconciled": False},
        "tokens": {"total": 9},
    }
    ten = score_from_result("A", 1, "d", 10, result)
    assert ten.rubric == round(5 * 10 / 7, 3) and ten.strict == 0
    full = score_from_result("A", 2, "d", 10, {**result, "evaluation_score": 7})
    assert full.rubric == 10 and full.strict == 10
    none = score_from_result("B", 1, "d", 7, {**result, "selected": None, "outcome": "failed"})
    answered = score_from_result("C", 1, "d", 7, {**result, "answer_check": {"verdict": "wrong"}})
    assert answered.answer == "wrong" and ten.answer is None
    assert none.grade is None and none.rubric == 0 and none.strict == 0
    lost = RunScore("B", 2, "d", "error", 7, error="endpoint down")
    summary = summarise([("A", 10), ("B", 7)], [ten, full, none, lost], runs=2)
    assert [t.complete for t in summary.totals] == [True, False]
    assert summary.rubric_total is not None and summary.rubric_total.n == 1  # only run 1
    assert summary.strict_total is not None and summary.strict_total.mean == 0
    assert summary.max_total == 17 and summary.unfinished == [lost]
    assert summary.problems[0].strict is not None and summary.problems[0].strict.high == 10
