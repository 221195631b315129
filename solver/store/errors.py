"""The run store's exception tree.

::

    StoreError                  anything wrong with a run directory or its use
    ├── RunExists               create() on a directory that already holds something
    ├── NotARun                 the directory is missing or holds no MANIFEST.json
    ├── LockHeld                another live process is the run's writer (pid, host)
    ├── CorruptionError         the journal is damaged beyond a torn tail (seq, reason)
    ├── BlobMissing             a referenced blob is absent
    ├── BlobCorrupt             a blob's bytes do not hash to its name
    └── StorageFull             the disk is full or the file too large (ENOSPC / EFBIG)

The store imports nothing else of the project; ``solver.errors.exit_code_for`` maps these to
CLI exit codes by class name (LockHeld -> 75, CorruptionError -> 65, StorageFull -> 74).
"""

from __future__ import annotations

import errno


class StoreError(Exception):
    """Base of every error the run store raises on purpose."""


class RunExists(StoreError):
    def __init__(self, run_dir: str) -> None:
        super().__init__(f"run directory already exists and is not empty: {run_dir}")
        self.run_dir = run_dir


class NotARun(StoreError):
    def __init__(self, run_dir: str, reason: str) -> None:
        super().__init__(f"not a run directory: {run_dir} ({reason})")
        self.run_dir = run_dir
        self.reason = reason


class LockHeld(StoreError):
    def __init__(self, run_dir: str, pid: int | None, host: str | None) -> None:
        holder = f"pid {pid} on {host}" if pid is not None else "an unknown process"
        super().__init__(f"run {run_dir} is being written by {holder}")
        self.run_dir = run_dir
        self.pid = pid
        self.host = host


class CorruptionError(StoreError):
    def __init__(self, seq: int, reason: str) -> None:
        super().__init__(f"journal corrupt at seq {seq}: {reason}")
        self.seq = seq
        self.reason = reason


class BlobMissing(StoreError):
    def __init__(self, digest: str) -> None:
        super().__init__(f"blob missing: {digest}")
        self.digest = digest


class BlobCorrupt(StoreError):
    def __init__(self, digest: str, actual: str) -> None:
        super().__init__(f"blob {digest} hashes to {actual}")
        self.digest = digest
        self.actual = actual


class StorageFull(StoreError, OSError):
    """Also an OSError carrying the original errno, so callers that map ENOSPC by errno
    (``solver.errors.exit_code_for``) see it for what it is."""

    def __init__(self, path: str, cause: OSError) -> None:
        what = "disk full" if cause.errno == errno.ENOSPC else "file too large"
        self.message = f"cannot write {path}: {what} ({cause.strerror})"
        super().__init__(self.message)
        self.path = path
        self.errno = cause.errno
        self.strerror = cause.strerror

    def __str__(self) -> str:
        return self.message
