"""Runs every case of the hostile catalogue (tests/hostile/catalogue.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.catalogue import CASES, Case, Ctx


@pytest.mark.timeout(120)  # a case that hangs (a FIFO read, an endless file) fails, not waits
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_case(
    case: Case,
    tmp_path: Path,
    finished_run: Path,
    outside: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # no solver.toml of the checkout is read
    case.check(Ctx(tmp_path, finished_run, outside))


def test_every_numbered_finding_has_a_case() -> None:
    items = {c.item for c in CASES}
    # 2 and 9 are covered in test_endpoints.py and test_admin_route.py
    assert items >= {"1", "3", "4", "5", "6", "7", "8", "10", "11"}
    assert len({c.name for c in CASES}) == len(CASES)
