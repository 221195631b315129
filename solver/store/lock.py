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
from dataclasses import dataclass
from pathlib import Path
from time import sleep

from solver._util.fs import write_all
from solver.store._fs import MAX_SMALL_FILE_BYTES, read_regular
from solver.store.errors import LockHeld, UnsafeEntry

LOCK_NAME = ".lock"
PROBE_RETRIES = 5
PROBE_RETRY_S = 0.02


@dataclass(frozen=True, slots=True)
class WriterInfo:
    """What a writer leaves in the lock file: its pid, host and session, and ``stopped`` when
    it gave up without the journal being able to say why. The file is the run's, so possibly
    hostile: a field of the wrong type reads as absent."""

    pid: int | None = None
    host: str | None = None
    session: int | None = None
    stopped: str | None = None

    def as_json(self) -> dict[str, int | str]:
        """The lock file's JSON object (the fields present)."""
        fields = {"pid": self.pid, "host": self.host, "session": self.session}
        fields["stopped"] = self.stopped
        return {key: value for key, value in fields.items() if value is not None}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _read_holder(path: Path) -> WriterInfo:
    try:
        info = json.loads(read_regular(path, MAX_SMALL_FILE_BYTES))
    except (OSError, ValueError, RecursionError, UnsafeEntry):
        return WriterInfo()
    if not isinstance(info, dict):
        return WriterInfo()
    host, stopped = info.get("host"), info.get("stopped")
    return WriterInfo(
        pid=_int(info.get("pid")),
        host=host if isinstance(host, str) else None,
        session=_int(info.get("session")),
        stopped=stopped if isinstance(stopped, str) else None,
    )


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
            raise LockHeld(str(self.path.parent), holder.pid, holder.host) from None
        self._fd = fd
        self.update(session)

    def update(self, session: int, stopped: str | None = None) -> None:
        """Rewrite the holder information (the session number changes on resume). ``stopped``
        says why the writer is giving up when the journal cannot record it (a full disk)."""
        if self._fd is None:
            return
        info = WriterInfo(os.getpid(), socket.gethostname(), session, stopped).as_json()
        os.ftruncate(self._fd, 0)
        os.lseek(self._fd, 0, os.SEEK_SET)
        write_all(self._fd, json.dumps(info, sort_keys=True).encode() + b"\n")

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def lock_info(run_dir: Path) -> WriterInfo:
    """What the last writer left in the lock file, held or not (no fields when none)."""
    return _read_holder(run_dir / LOCK_NAME)


def lock_holder(run_dir: Path) -> WriterInfo | None:
    """The live writer's pid, host and session, or None when nobody holds the lock.
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
