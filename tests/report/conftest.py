"""Fixtures for the report tests (tests/evaluation shares them): runs made by the real loop
against the scripted fake endpoint (127.0.0.1 only)."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from solver.config import resolve_settings
from solver.evaluation import quiet_progress
from solver.problems import Problem
from solver.run import start_run
from solver.testing import FakeEndpoint
from tests.report.responders import olympiad

STATEMENT = "Prove that the sum of the squares of two odd integers is never a perfect square."


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeEndpoint]:
    with FakeEndpoint(olympiad) as endpoint:
        yield endpoint


def solve(fake: FakeEndpoint, run_dir: Path, **flags: object) -> dict[str, object]:
    """A real run of the loop: two candidates, each revised once, then three evaluation
    graders against the reference solution."""
    problem = Problem(
        id="odd-squares",
        title="Odd squares",
        statement=STATEMENT,
        reference_solution="Squares are 0 or 1 modulo 4.",
    )
    resolved = resolve_settings(
        flags={
            "endpoint": fake.url + "/v1",
            "candidates": 2,
            "acceptance.verifications": 2,
            "grading.evaluation_graders": 3,
            **flags,
        },
        env={},
        cwd=run_dir.parent,
    )
    outcome = asyncio.run(
        start_run(
            problem,
            None,
            resolved,
            evaluation=True,
            argv=["test"],
            make_progress=quiet_progress,
            on_created=lambda _: None,
            run_dir=run_dir,
        )
    )
    return outcome.result.to_json()


@pytest.fixture(scope="module")
def finished_run(fake: FakeEndpoint, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("runs") / "finished"
    solve(fake, run_dir)
    return run_dir


def cut_journal(source: Path, target: Path, lines: int, torn: bytes = b"") -> Path:
    """A copy of a run as a kill would leave it: the first ``lines`` journal lines, then
    optionally a torn (incomplete) last line."""
    shutil.copytree(source, target)
    shutil.rmtree(target / "final")
    journal = (source / "journal.jsonl").read_bytes().splitlines(keepends=True)
    (target / "journal.jsonl").write_bytes(b"".join(journal[:lines]) + torn)
    return target
