"""A kill between a call's completion record and the artifacts it produced.

The engine appends ``call.completed`` and then one ``artifact.put`` per artifact (a proof, a
verification report, a review). A session killed between the two leaves a completed call whose
artifacts were never recorded; a resume must record them from the call's own response, never
ask the model again, and the run must finish and audit clean.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from solver.store import RunReader
from solver.testing import FakeEndpoint
from tests.loop import scripts
from tests.loop.harness import audit_ok, result_of, resume, solve
from tests.loop.test_resume import assert_nothing_paid_twice


def _cut_after(run_dir: Path, copy: Path, call_id: str) -> int:
    """Copy the run as a session killed right after ``call_id``'s completion record would
    leave it: the journal up to that line, no final files. Returns the artifacts cut off."""
    shutil.copytree(run_dir, copy)
    shutil.rmtree(copy / "final", ignore_errors=True)
    journal = copy / "journal.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    records = list(RunReader(run_dir).records())
    assert len(records) == len(lines)
    end = next(
        i
        for i, rec in enumerate(records)
        if rec.type == "call.completed" and rec.data["call_id"] == call_id
    )
    produced = 0
    for rec in records[end + 1 :]:
        if rec.type != "artifact.put" or rec.data.get("producer") != call_id:
            break
        produced += 1
    journal.write_bytes(b"".join(lines[: end + 1]))
    return produced


def _completed_by_role(run_dir: Path) -> dict[str, str]:
    first: dict[str, str] = {}
    for rec in RunReader(run_dir).records():
        if rec.type == "call.completed":
            first.setdefault(rec.data["role"], rec.data["call_id"])
    return first


@pytest.mark.parametrize("role", ["generator", "verifier", "reviser"])
def test_killed_between_completion_and_its_artifacts(tmp_path: Path, role: str) -> None:
    with FakeEndpoint(scripts.fix_after_finding) as fake:
        finished = solve(fake, tmp_path)
        assert finished.outcome == "solved"
        call_id = _completed_by_role(finished.run_dir)[role]
        copy = tmp_path / "killed"
        produced = _cut_after(finished.run_dir, copy, call_id)
        assert produced >= 1, f"{call_id} produced no artifact: the test cuts nothing"
        again = resume(copy, tmp_path)
    assert again.outcome == "solved"
    assert result_of(copy)["outcome"] == result_of(finished.run_dir)["outcome"]
    records = list(RunReader(copy).records())
    recorded = [
        r for r in records if r.type == "artifact.put" and r.data.get("producer") == call_id
    ]
    assert len(recorded) == produced
    audit_ok(copy)
    assert_nothing_paid_twice(copy)
