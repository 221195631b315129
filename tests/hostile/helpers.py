"""Shared pieces of the hostile catalogue and its fuzz: the CLI run in-process with the
properties every hostile input must keep (documented exit code, one line, no traceback),
a finished run to damage, and snapshots that show nothing else was touched."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from solver.cli.main import main

# Every code solver/errors.py documents; anything else (or a traceback) is a bug.
DOCUMENTED_EXITS = frozenset({0, 1, 2, 3, 4, 5, 6, 7, 65, 74, 75, 130})
# A one-line error is short: the longest the CLI prints (cli/errors.py) plus its prefix.
MAX_ERROR_LINE = 1100


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str


def run_cli(argv: list[str], env: Mapping[str, str] | None = None) -> Outcome:
    """``solver ARGV`` in-process. Asserts the properties every outcome must have: a
    documented exit code, no traceback, and for a failure exactly one short stderr line
    (warnings aside)."""
    runner = CliRunner()
    base = {
        name: None for name in os.environ if name.startswith(("SOLVER_", "OPENAI_", "ANTHROPIC_"))
    }
    result = runner.invoke(main, argv, env={**base, **(env or {})}, catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"solver {argv!r} raised {result.exception!r}") from result.exception
    stderr = result.stderr
    assert "Traceback" not in stderr and "Traceback" not in result.stdout, stderr[-2000:]
    assert result.exit_code in DOCUMENTED_EXITS, (result.exit_code, stderr[-2000:])
    if result.exit_code not in (0, 4, 130):  # a failed audit reports in its table
        # ours is "error: ...", click's usage errors "Error: ..." after a usage hint
        errors = [line for line in stderr.splitlines() if line.startswith(("error:", "Error:"))]
        assert len(errors) == 1, stderr[-2000:]
        assert len(errors[0]) <= MAX_ERROR_LINE, len(errors[0])
        assert "\x1b" not in errors[0]
    return Outcome(result.exit_code, result.stdout, stderr)


def tree_snapshot(root: Path) -> dict[str, tuple[str, str]]:
    """Every entry under ``root``: kind and (for regular files) content digest, without
    following symlinks or opening special files."""
    found: dict[str, tuple[str, str]] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        name = path.relative_to(root).as_posix()
        if stat.S_ISLNK(info.st_mode):
            found[name] = ("link", os.readlink(path))
        elif stat.S_ISREG(info.st_mode):
            found[name] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
        elif stat.S_ISDIR(info.st_mode):
            found[name] = ("dir", "")
        else:
            found[name] = ("special", oct(stat.S_IFMT(info.st_mode)))
    return found


def copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    lock = dst / ".lock"
    if lock.exists():
        lock.unlink()
    return dst


def blob_files(run_dir: Path) -> list[Path]:
    return sorted(p for p in (run_dir / "blobs" / "sha256").rglob("*") if p.is_file())
