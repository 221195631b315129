"""docs/benchmarks.md carries the current per-benchmark pages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_benchmarks_doc_is_rebuilt_from_the_current_pages() -> None:
    check = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "docs.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stderr
