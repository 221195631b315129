"""`solver runs`: listing runs newest first without the lock, damaged ones as damaged, and
removing old runs only when they are really runs and not running."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import solver.run.listing as listing
from solver.cli.main import main
from solver.run import run_status
from solver.run.listing import list_runs, read_run_row
from solver.store.lock import WriterLock
from solver.testing import FakeEndpoint
from tests.report.conftest import cut_journal, solve


@pytest.fixture(scope="module")
def runs_dir(fake: FakeEndpoint, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two finished runs (the second newer), a README, and beside them a copy of the first
    cut as a kill leaves it."""
    base = tmp_path_factory.mktemp("runs-list")
    runs = base / "runs"
    runs.mkdir()
    solve(fake, runs / "a-older")
    solve(fake, runs / "b-newer")
    cut_journal(runs / "a-older", base / "cut", lines=60)
    (runs / "README.md").write_text("not a run\n")
    return base


def _copy(runs_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "runs"
    shutil.copytree(runs_dir / "runs", target, symlinks=True)
    return target


def test_runs_are_listed_newest_first_with_their_totals(runs_dir: Path) -> None:
    rows = list_runs(runs_dir / "runs")
    assert [row.path.name for row in rows] == ["b-newer", "a-older"]
    for row in rows:
        result = json.loads((row.path / "final" / "result.json").read_text())
        assert row.status == "finished" == run_status(row.path)["state"]
        assert (row.problem, row.outcome) == ("odd-squares", result["outcome"])
        assert (row.best_grade, row.tokens) == (result["score"], result["tokens"]["total"])
        assert row.started is not None and row.wall_s == result["wall_s"]


def test_a_finished_run_is_read_without_folding_its_journal(
    runs_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_fold(run_dir: Path) -> object:
        raise AssertionError(f"folded {run_dir}")

    monkeypatch.setattr(listing, "read_state", no_fold)
    assert [row.status for row in list_runs(runs_dir / "runs")] == ["finished", "finished"]


def test_an_unfinished_run_is_folded_and_classified_as_status_does(runs_dir: Path) -> None:
    row = read_run_row(runs_dir / "cut")
    status = run_status(runs_dir / "cut")
    assert row.status == status["state"] == "crashed"
    assert row.tokens == status["tokens"] and row.outcome is None


def test_a_running_run_is_listed_as_running_and_cannot_be_removed(
    runs_dir: Path, tmp_path: Path
) -> None:
    runs = _copy(runs_dir, tmp_path)
    lock = WriterLock(runs / "b-newer")
    lock.acquire(2)
    try:
        assert read_run_row(runs / "b-newer").status == "running"
        result = CliRunner().invoke(main, ["runs", "rm", "--yes", str(runs / "b-newer")])
        assert result.exit_code == 75, result.output
        pruned = CliRunner().invoke(main, ["runs", "prune", str(runs), "--older-than", "0s"])
        assert "b-newer" not in pruned.output
    finally:
        lock.release()
    assert (runs / "b-newer" / "MANIFEST.json").is_file()


def test_hostile_run_directories_are_listed_as_damaged(runs_dir: Path, tmp_path: Path) -> None:
    runs = _copy(runs_dir, tmp_path)
    (runs / "bad-manifest").mkdir()
    (runs / "bad-manifest" / "MANIFEST.json").write_text("{")
    shutil.copytree(runs / "a-older", runs / "fifo-journal")
    (runs / "fifo-journal" / "journal.jsonl").unlink()
    os.mkfifo(runs / "fifo-journal" / "journal.jsonl")
    shutil.copytree(runs / "a-older", runs / "linked-result")
    (runs / "linked-result" / "final" / "result.json").unlink()
    (runs / "linked-result" / "final" / "result.json").symlink_to("/etc/hostname")
    (runs / "elsewhere").symlink_to(runs / "a-older")
    result = CliRunner().invoke(main, ["runs", str(runs), "--json"])
    assert result.exit_code == 0, result.output
    rows = {Path(row["run_dir"]).name: row for row in map(json.loads, result.output.splitlines())}
    assert {name for name, row in rows.items() if row["status"] == "damaged"} == {
        "bad-manifest",
        "fifo-journal",
        "linked-result",
        "elsewhere",
    }
    assert "symbolic link" in rows["elsewhere"]["detail"]
    assert "symbolic link" in rows["linked-result"]["detail"]
    assert rows["a-older"]["status"] == rows["b-newer"]["status"] == "finished"
    text = CliRunner().invoke(main, ["runs", str(runs)])
    assert text.exit_code == 0 and "damaged" in text.output and "b-newer" in text.output


def test_runs_lists_the_default_directory_and_says_when_there_is_none(
    runs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _copy(runs_dir, tmp_path)
    monkeypatch.chdir(tmp_path)
    listed = CliRunner().invoke(main, ["runs"])
    assert listed.exit_code == 0
    assert listed.output.splitlines()[0].split()[:3] == ["run", "problem", "outcome"]
    assert [line.split()[0] for line in listed.output.splitlines()[1:]] == ["b-newer", "a-older"]
    missing = CliRunner().invoke(main, ["runs", str(tmp_path / "nowhere")])
    assert missing.exit_code == 6 and "no such runs directory" in missing.output


def test_rm_removes_only_with_yes_and_checks_every_run_first(
    runs_dir: Path, tmp_path: Path
) -> None:
    runs = _copy(runs_dir, tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    (runs / "a-older" / "final" / "outside").symlink_to(outside)
    (tmp_path / "plain").mkdir()
    (runs / "elsewhere").symlink_to(runs / "b-newer")
    dry = CliRunner().invoke(main, ["runs", "rm", str(runs / "a-older")])
    assert dry.exit_code == 0 and "would remove" in dry.output
    assert (runs / "a-older").is_dir()
    for bad, code, words in (
        (tmp_path / "plain", 2, "not a run directory"),
        (runs / "elsewhere", 2, "symbolic link"),
        (tmp_path / "gone", 6, "no such run directory"),
    ):
        refused = CliRunner().invoke(main, ["runs", "rm", "--yes", str(runs / "a-older"), str(bad)])
        assert refused.exit_code == code and words in refused.output
        assert (runs / "a-older").is_dir()  # checked all before removing any
    done = CliRunner().invoke(main, ["runs", "rm", "--yes", str(runs / "a-older")])
    assert done.exit_code == 0 and "removed" in done.output
    assert not (runs / "a-older").exists()
    assert (outside / "keep.txt").read_text() == "mine"  # the symlink was not followed
    assert (runs / "b-newer").is_dir() and (runs / "elsewhere").is_symlink()


def test_prune_removes_old_runs_and_keeps_solved_ones_when_asked(
    runs_dir: Path, tmp_path: Path
) -> None:
    runs = _copy(runs_dir, tmp_path)
    shutil.copytree(runs_dir / "cut", runs / "old-crashed")
    keep = CliRunner().invoke(
        main, ["runs", "prune", str(runs), "--older-than", "0s", "--keep-solved", "--yes"]
    )
    assert keep.exit_code == 0, keep.output
    assert not (runs / "old-crashed").exists()
    assert (runs / "a-older").is_dir() and (runs / "b-newer").is_dir()
    young = CliRunner().invoke(main, ["runs", "prune", str(runs), "--older-than", "30d"])
    assert young.exit_code == 0 and "would remove" not in young.output
    solved = CliRunner().invoke(main, ["runs", "prune", str(runs), "--older-than", "0s"])
    assert solved.output.count("would remove") == 2 and (runs / "a-older").is_dir()
    bad = CliRunner().invoke(main, ["runs", "prune", str(runs), "--older-than", "soon"])
    assert bad.exit_code == 2 and "--older-than" in bad.output


def test_resume_of_a_finished_run_says_so_in_one_line_and_appends_nothing(
    finished_run: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "done"
    shutil.copytree(finished_run, run_dir)
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != ".lock"}
    result = CliRunner().invoke(main, ["resume", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert result.output.count("\n") == 1
    assert result.output.startswith(f"{run_dir}: already finished (solved, L")
    assert "nothing to resume" in result.output
    as_json = CliRunner().invoke(main, ["resume", "--json", str(run_dir)])
    assert json.loads(as_json.output)["event"] == "run.already_finished"
    after = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != ".lock"}
    assert after == before


def test_a_last_journal_line_nested_too_deep_is_damage_not_a_crash(
    finished_run: Path, tmp_path: Path
) -> None:
    """Found by tests/hostile/test_fuzz.py: the torn-tail check read such a line with the
    standard library's parser, whose RecursionError escaped as exit 1."""
    run_dir = tmp_path / "runs" / "deep"
    shutil.copytree(finished_run, run_dir)
    with (run_dir / "journal.jsonl").open("ab") as journal:
        journal.write(b"[" * 100_000 + b"]" * 100_000 + b"\n")
    status = CliRunner().invoke(main, ["status", str(run_dir)])
    assert status.exit_code == 65 and "nested too deeply" in status.output
    assert read_run_row(run_dir).status == "damaged"
