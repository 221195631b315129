"""Removing old runs (`solver runs rm`, `solver runs prune`): only what is really a run, never
one that is being written, never through a symlink.

A run is removed only when the path itself is a directory (not a symlink to one) holding a
MANIFEST.json that reads as a run's manifest; the writer lock is taken first (a running run
refuses with exit 75, and no resume can start while the files go) and held until the
directory is gone. :func:`shutil.rmtree` removes the tree through directory descriptors, so a
symlink inside the run is unlinked, never followed.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

from solver.errors import InputError, NotFound
from solver.run.listing import RunRow, read_run_row
from solver.run.manifest import read_manifest
from solver.store import LockHeld, RunReader, WriterLock, lock_holder

__all__ = ["check_removable", "older_than", "parse_age", "remove_run", "run_bytes"]

_AGE = re.compile(r"^(\d{1,6})([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def check_removable(run_dir: Path) -> RunRow:
    """The run's row when ``run_dir`` may be removed; else the error that says why (exit 6:
    missing, 2: not a run directory or a symlink, 75: running)."""
    try:
        info = os.lstat(run_dir)
    except FileNotFoundError:
        raise NotFound(f"{run_dir}: no such run directory") from None
    except OSError as exc:
        raise InputError(f"{run_dir}: cannot read: {exc.strerror or exc}") from None
    if stat.S_ISLNK(info.st_mode):
        raise InputError(f"{run_dir}: is a symbolic link; name the run directory itself")
    if not stat.S_ISDIR(info.st_mode):
        raise InputError(f"{run_dir}: not a directory")
    try:
        read_manifest(RunReader(run_dir).manifest, run_dir)
    except Exception as exc:
        raise InputError(
            f"{run_dir}: not a run directory (MANIFEST.json: {str(exc)[:200]}); not removed"
        ) from None
    holder = lock_holder(run_dir)
    if holder is not None:
        raise LockHeld(str(run_dir), holder.pid, holder.host)
    return read_run_row(run_dir)


def remove_run(run_dir: Path) -> int:
    """Remove a run checked by :func:`check_removable`, holding its writer lock; the bytes
    freed."""
    lock = WriterLock(run_dir)
    lock.acquire(0)  # LockHeld (exit 75) when a writer started since the check
    try:
        size = run_bytes(run_dir)
        shutil.rmtree(run_dir)
    finally:
        lock.release()
    return size


def run_bytes(run_dir: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(run_dir, followlinks=False):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def parse_age(text: str) -> timedelta:
    """``30d``, ``12h``, ``2w``, ``90m``, ``45s``."""
    found = _AGE.match(text.strip())
    if found is None:
        raise InputError(f"--older-than {text[:40]!r}: expected a number and s, m, h, d or w")
    return timedelta(**{_UNITS[found.group(2)]: int(found.group(1))})


def older_than(row: RunRow, age: timedelta, now: datetime | None = None) -> bool:
    """Whether the run was started more than ``age`` ago (a run without a readable start
    time is never old)."""
    if row.started is None:
        return False
    try:
        started = datetime.fromisoformat(row.started.replace("Z", "+00:00"))
    except ValueError:
        return False
    if started.tzinfo is None:
        started = started.replace(tzinfo=UTC)
    return (now or datetime.now(UTC)) - started > age
