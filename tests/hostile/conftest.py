"""One finished run, made once per session against the fake endpoint, for the cases that
damage a copy of it; and a sentinel directory outside every run that no case may touch."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.testing import FakeEndpoint
from tests.loop import scripts
from tests.loop.harness import solve


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("finished")
    with FakeEndpoint(scripts.solved) as fake:
        outcome = solve(fake, base, candidates=1)
    assert outcome.outcome == "solved"
    return outcome.run_dir


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """Files outside the run that planted links point at."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "precious.txt").write_text("must survive\n")
    (folder / ".keep.abc123.tmp").write_text("not the run's temporary file\n")
    return folder
