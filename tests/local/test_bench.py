"""bench/local_model.py runs against the real build and prints its table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.local_server import LocalModel

BENCH = Path(__file__).resolve().parents[2] / "bench" / "local_model.py"


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=600
    )


def test_unknown_variant_is_a_one_line_error() -> None:
    done = _bench("--variants", "t1,t9")
    assert done.returncode == 2
    assert done.stderr.strip().startswith("error: unknown variant")
    assert "Traceback" not in done.stderr


@pytest.mark.local_model
def test_bench_prints_one_row_per_variant_with_ratios(local_model: LocalModel) -> None:
    done = _bench("--rounds", "1", "--tokens", "4", "--variants", "t1,t1-poll50")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("t1")]
    assert [row[0] for row in rows] == ["t1", "t1-poll50"]
    assert rows[0][-1] == "1.00x"
    assert all(float(row[2]) > 0 for row in rows)  # decode tok/s
