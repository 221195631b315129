"""The single-writer lock: ``fcntl.flock`` on ``<run>/.lock``, which holds the holder's pid,
host and session as JSON so a refused writer can say who holds it. The kernel drops the lock
when its holder dies, so a crashed writer never leaves a stale lock behind."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import stat
from pathlib import Path
from time import sleep
from typing import Any

from solver._util.fs import write_all
from solver.store._fs import MAX_SMALL_FILE_BYTES, read_regular
from solver.store.errors import LockHeld, UnsafeEntry

LOCK_NAME = ".lock"
PROBE_RETRIES = 5
PROBE_RETRY_S = 0.02


def _read_holder(path: Path) -> dict[str, Any]:
    try:
        info = json.loads(read_regular(path, MAX_SMALL_FILE_BYTES))
    except (OSError, ValueError, RecursionError, UnsafeEntry):
        return {}
    return info if isinstance(info, dict) else {}


def _try_exclusive(fd: int) -> bool:
    """Take the exclusive lock without waiting for a writer, but ride out the brief shared
    lock a reader's :func:`lock_holder` probe holds (microseconds) with a few retries."""
    for attempt in range(PROBE_RETRIES):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if attempt + 1 < PROBE_RETRIES:
                sleep(PROBE_RETRY_S)
    return False


def _open_lock_file(path: Path, flags: int) -> int:
    """The lock file, never through a symlink and never a FIFO or device (a planted link
    would have the writer truncate a file outside the run; a FIFO would block the open)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeEntry(str(path), "is a symbolic link") from None
        if exc.errno == errno.EISDIR:
            raise UnsafeEntry(str(path), "is a directory, not a file") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeEntry(str(path), "is not a regular file")
    os.set_blocking(fd, True)
    return fd


class WriterLock:
    """Held from :meth:`acquire` until :meth:`release` (or the process ends)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LOCK_NAME
        self._fd: int | None = None

    def acquire(self, session: int) -> None:
        fd = _open_lock_file(self.path, os.O_RDWR | os.O_CREAT)
        if not _try_exclusive(fd):
            os.close(fd)
            holder = _read_holder(self.path)
            pid = holder.get("pid")
            host = holder.get("host")
            raise LockHeld(
                str(self.path.parent),
                pid if isinstance(pid, int) else None,
                host if isinstance(host, str) else None,
            ) from None
        self._fd = fd
        self.update(session)

    def update(self, session: int, stopped: str | None = None) -> None:
        """Rewrite the holder information (the session number changes on resume). ``stopped``
        says why the writer is giving up when the journal cannot record it (a full disk)."""
        if self._fd is None:
            return
        info: dict[str, Any] = {"pid": os.getpid(), "host": socket.gethostname()}
        info["session"] = session
        if stopped is not None:
            info["stopped"] = stopped
        os.ftruncate(self._fd, 0)
        os.lseek(self._fd, 0, os.SEEK_SET)
        write_all(self._fd, json.dumps(info, sort_keys=True).encode() + b"\n")

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def lock_info(run_dir: Path) -> dict[str, Any]:
    """What the last writer left in the lock file, held or not (``{}`` when none)."""
    return _read_holder(run_dir / LOCK_NAME)


def lock_holder(run_dir: Path) -> dict[str, Any] | None:
    """The live writer's ``{"pid", "host", "session"}``, or None when nobody holds the lock.
    Probes with a shared, non-blocking flock that it drops at once."""
    path = run_dir / LOCK_NAME
    try:
        fd = _open_lock_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(path)
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
