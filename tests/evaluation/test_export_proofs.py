"""`solver eval proofs SOURCE... --out FILE`: a run's own proofs, written for humans to grade,
and read back by `solver eval calibrate` once graded."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from solver.cli.main import main
from solver.evaluation import load_graded, rivals_of
from solver.testing import FakeEndpoint, RecordedRequest, role_of
from solver.testing.fake_endpoint import Reply
from tests.loop import scripts
from tests.loop.harness import EVAL_PROBLEM, ScriptedEndpoint, solve, state_of
from tests.loop.scripts import json_reply
from tests.report.responders import variant_verifier

FIELDS = {
    "id",
    "human_grade",
    "max_points",
    "problem",
    "reference_solution",
    "grading_guidelines",
    "proof",
    "source",
}


def _revised_run(tmp_path: Path, problem: str | None = None, **extra: Any) -> Path:
    """One lineage: a flawed first proof that fails, revised into one that is accepted."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    with ScriptedEndpoint(scripts.fix_after_finding) as scripted:
        kwargs: dict[str, Any] = {"candidates": 1, **extra}
        outcome = solve(
            scripted, tmp_path, **({"problem_text": problem} if problem else {}), **kwargs
        )
    return outcome.run_dir


def _export(*args: str) -> Any:
    return CliRunner().invoke(main, ["eval", "proofs", *args])


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_writes_the_accepted_proof_for_blind_grading_and_every_version_on_request(
    tmp_path: Path,
) -> None:
    run = _revised_run(tmp_path)
    state = state_of(run)
    (lineage,) = state.lineages.values()
    assert [v.status for v in lineage.versions.values()] == ["failed", "accepted"]

    chosen = tmp_path / "chosen.jsonl"
    result = _export(str(run), "--out", str(chosen))
    assert result.exit_code == 0, result.output
    assert "wrote 1 proof(s) of 1 problem(s) from 1 run(s)" in result.output
    assert f"solver eval calibrate {chosen} --verifications 8 --comparisons" in result.output
    (row,) = _rows(chosen)
    assert set(row) == FIELDS  # no verdict, grade, status or choice of the machine
    assert row["human_grade"] is None and row["max_points"] == 7
    assert row["problem"].startswith("Prove that the sum of the squares")
    assert scripts.GOOD_PROOF in row["proof"] and "FLAW" not in row["proof"]
    sha = hashlib.sha256(row["proof"].encode()).hexdigest()
    assert row["id"] == f"odd-squares-{sha[:12]}"
    assert [(s["lineage"], s["version"]) for s in row["source"]] == [("L0", 1)]

    every = tmp_path / "all.jsonl"
    result = _export(str(run), "--out", str(every), "--versions", "all", "--json")
    assert result.exit_code == 0, result.output
    event = json.loads(result.output)
    assert event == {
        "event": "proofs.written",
        "out": str(every),
        "sheet": None,
        "proofs": 2,
        "problems": 1,
        "runs": 1,
        "unfinished": 0,
    }
    rows = _rows(every)
    # ordered by digest, not by version: the order does not say which proof was accepted
    digests = [hashlib.sha256(r["proof"].encode()).hexdigest() for r in rows]
    assert digests == sorted(digests)
    assert sorted("FLAW" in r["proof"] for r in rows) == [False, True]


def test_one_line_per_distinct_proof_across_runs_and_evaluation_directories(
    tmp_path: Path,
) -> None:
    run = _revised_run(tmp_path / "a")
    # an evaluation directory as `solver eval SET` lays it out: OUT/<item>/run-N
    evaluation = tmp_path / "evals" / "set"
    shutil.copytree(run, evaluation / "odd-squares" / "run-1")
    shutil.copytree(run, evaluation / "odd-squares" / "run-2")
    (evaluation / "not-started").mkdir()
    (evaluation / "EVAL.json").write_text(
        json.dumps({"dirs": {"odd-squares": "odd-squares", "other": "not-started"}})
    )
    out = tmp_path / "graded.jsonl"
    result = _export(str(run), str(evaluation), "--out", str(out), "--versions", "all")
    assert result.exit_code == 0, result.output
    assert "from 3 run(s)" in result.output
    rows = _rows(out)
    assert len(rows) == 2  # the same two texts in three runs
    for row in rows:
        assert len(row["source"]) == 3
        assert {s["run_dir"] for s in row["source"]} == {
            str(run),
            str(evaluation / "odd-squares" / "run-1"),
            str(evaluation / "odd-squares" / "run-2"),
        }


def test_calibrate_says_how_many_proofs_still_need_a_human_grade(tmp_path: Path) -> None:
    run = _revised_run(tmp_path, problem=EVAL_PROBLEM)
    out, sheet = tmp_path / "to-grade.jsonl", tmp_path / "to-read.md"
    result = _export(str(run), "--out", str(out), "--versions", "all", "--sheet", str(sheet))
    assert result.exit_code == 0, result.output
    assert f"(to read: {sheet})" in result.output
    rows = _rows(out)
    assert {r["reference_solution"] for r in rows} == {"Work modulo 4. MARKER-REFERENCE-55aa"}
    # the sheet: the problem and its reference once, each proof under its line's id
    text = sheet.read_text(encoding="utf-8")
    assert text.count("MARKER-REFERENCE-55aa") == 1 and text.count("## Problem ") == 1
    assert text.count("### Proof `") == 2
    for row in rows:
        assert f"### Proof `{row['id']}`\n\n{row['proof']}" in text
    again = _export(str(run), "--out", str(tmp_path / "other.jsonl"), "--sheet", str(sheet))
    assert again.exit_code == 2 and "to-read.md: exists" in again.output
    assert not (tmp_path / "other.jsonl").exists()
    assert {r["grading_guidelines"] for r in rows} == {"(Partial) reduce modulo 4."}

    ungraded = CliRunner().invoke(main, ["eval", "calibrate", str(out)])
    assert ungraded.exit_code == 2
    assert "2 of 2 proofs have no human grade yet (line 1, 2)" in ungraded.output
    assert "Traceback" not in ungraded.output

    for row in rows:  # a person grades them
        row["human_grade"] = 0 if "FLAW" in row["proof"] else 7
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items = load_graded(out)
    assert sorted(i.human for i in items) == [0, 7]
    assert {i.problem.reference_solution for i in items} == {rows[0]["reference_solution"]}
    # two proofs of one problem graded differently: a pair for --comparisons
    assert sum(len(r) for r in rivals_of(items).values()) == 1


@pytest.mark.parametrize(
    ("setup", "code", "message"),
    [
        ("exists", 2, "exists (it may hold grades already given)"),
        ("suffix", 2, "the file calibrate reads ends in .jsonl"),
        ("not-a-run", 2, "neither a run (MANIFEST.json) nor an evaluation"),
        ("missing", 6, "not a directory"),
        ("eval-not-json", 2, "not JSON"),
        ("damaged-proof", 65, "hashes to"),
    ],
)
def test_bad_sources_and_outputs_are_one_line_errors_that_write_nothing(
    tmp_path: Path, setup: str, code: int, message: str
) -> None:
    run = _revised_run(tmp_path)
    out = tmp_path / "out.jsonl"
    source = run
    if setup == "exists":
        out.write_text('{"id": "graded-by-hand", "human_grade": 5}\n')
    elif setup == "suffix":
        out = tmp_path / "out.json"
    elif setup == "not-a-run":
        source = tmp_path / "empty"
        source.mkdir()
    elif setup == "missing":
        source = tmp_path / "nowhere"
    elif setup == "eval-not-json":
        source = tmp_path / "evals"
        source.mkdir()
        (source / "EVAL.json").write_text("{not json")
    elif setup == "damaged-proof":
        state = state_of(run)
        (lineage,) = state.lineages.values()
        artifact = state.artifacts[str(lineage.versions[1].proof_artifact)]
        digest = artifact.blob.removeprefix("sha256:")
        (run / "blobs" / "sha256" / digest[:2] / digest).write_bytes(b"\xff\xfe not the proof")
    before = out.read_bytes() if out.exists() else None
    result = _export(str(source), "--out", str(out))
    assert result.exit_code == code, result.output
    assert message in result.output and "Traceback" not in result.output
    assert (out.read_bytes() if out.exists() else None) == before


def _chain_responder(request: RecordedRequest) -> Reply:
    """Verifier variants with their own blind spots (``variant_verifier``) and a selector
    that takes the proof without the flaw."""
    if role_of(request) == "selector":
        first = request.user_text.split("Proof B", 1)[0]
        return json_reply("Choice.", {"choice": "B" if "FLAW" in first else "A", "reason": "r"})
    return variant_verifier(request)


def test_a_runs_proofs_graded_by_people_calibrate_the_verifiers_and_the_selector(
    tmp_path: Path,
) -> None:
    run = _revised_run(tmp_path / "solve")
    graded = tmp_path / "graded.jsonl"
    assert _export(str(run), "--out", str(graded), "--versions", "all").exit_code == 0
    rows = _rows(graded)
    for row in rows:
        row["human_grade"] = 0 if "FLAW" in row["proof"] else 7
    graded.write_text("".join(json.dumps(r) + "\n" for r in rows))

    out = tmp_path / "cal"
    with FakeEndpoint(_chain_responder) as fake:
        args = ["eval", "calibrate", str(graded), "--out", str(out), "--graders", "1"]
        result = CliRunner().invoke(
            main,
            [*args, "--verifications", "1", "--comparisons", "--json"],
            env={"SOLVER_ENDPOINT": fake.url + "/v1"},
        )
    assert result.exit_code == 0, result.output
    started = next(
        json.loads(line) for line in result.output.splitlines() if "calibrate.started" in line
    )
    assert started["items"] == 2 and started["pairs"] == 1  # the pair DSM-V2's file lacks
    data = json.loads((out / "calibration.json").read_text())
    assert data["selectors"]["comparisons"] == 1
    assert data["selectors"]["higher_share"] == 1.0
    verifiers = data["verifiers"]
    # of the one flawed proof: one variant is blind to it, the others are not
    assert verifiers["hidden_count"] == [0, 1]
    blind = sorted(v["blind"] for v in verifiers["variants"].values())
    assert blind == [0.0, 0.0, 1.0]


def test_a_calibrations_given_proofs_and_their_rivals_are_not_written_again(
    tmp_path: Path,
) -> None:
    graded = tmp_path / "graded.jsonl"
    rows = [
        {"id": "a", "problem": "Show q.", "proof": "Complete. GRADE=7", "human_grade": 7},
        {"id": "b", "problem": "Show q.", "proof": "Gap. GRADE=2", "human_grade": 2},
    ]
    graded.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "cal"
    with FakeEndpoint(_chain_responder) as fake:
        args = ["eval", "calibrate", str(graded), "--out", str(out), "--graders", "1"]
        result = CliRunner().invoke(
            main, [*args, "--comparisons"], env={"SOLVER_ENDPOINT": fake.url + "/v1"}
        )
    assert result.exit_code == 0, result.output
    # item a's run holds b as its rival: both were graded by people already
    assert "rival0" in state_of(out / "a").lineages
    exported = _export(str(out), "--out", str(tmp_path / "again.jsonl"), "--versions", "all")
    assert exported.exit_code == 2, exported.output
    assert "no proofs in 2 run(s)" in exported.output
