"""The run store's exception tree.

::

    StoreError                  anything wrong with a run directory or its use
    ├── RunExists               create() on a directory that already holds something
    ├── NotARun                 the directory is missing or holds no MANIFEST.json (NotFound)
    ├── LockHeld                another live process is the run's writer (RunLocked)
    ├── CorruptionError         the journal is damaged beyond a torn tail (RunCorrupt)
    │   └── UnsafeEntry         a symlink, special file, oversized file or escaping name
    ├── BlobMissing             a referenced blob is absent (RunCorrupt)
    └── BlobCorrupt             a blob's bytes do not hash to its name (RunCorrupt)

A full disk is :class:`solver.errors.StorageFull` (exit 74), re-exported here. The store
imports nothing of the project but :mod:`solver.errors`, whose tree these classes join: each
also derives from the family that gives its exit code.
"""

from __future__ import annotations

from solver.errors import NotFound, RunCorrupt, RunLocked, SolverError, StorageFull

__all__ = [
    "BlobCorrupt",
    "BlobMissing",
    "CorruptionError",
    "LockHeld",
    "NotARun",
    "RunExists",
    "StorageFull",
    "StoreError",
]


class StoreError(SolverError):
    """Base of every error the run store raises on purpose."""


class RunExists(StoreError):
    def __init__(self, run_dir: str) -> None:
        super().__init__(f"run directory already exists and is not empty: {run_dir}")
        self.run_dir = run_dir


class NotARun(StoreError, NotFound):
    def __init__(self, run_dir: str, reason: str) -> None:
        super().__init__(f"not a run directory: {run_dir} ({reason})")
        self.run_dir = run_dir
        self.reason = reason


class LockHeld(StoreError, RunLocked):
    def __init__(self, run_dir: str, pid: int | None, host: str | None) -> None:
        holder = f"pid {pid} on {host}" if pid is not None else "an unknown process"
        super().__init__(f"run {run_dir} is being written by {holder}")
        self.run_dir = run_dir
        self.pid = pid
        self.host = host


class CorruptionError(StoreError, RunCorrupt):
    def __init__(self, seq: int, reason: str) -> None:
        super().__init__(f"journal corrupt at seq {seq}: {reason}")
        self.seq = seq
        self.reason = reason


class UnsafeEntry(CorruptionError):
    """An entry of the run directory that no writer of ours makes: a symbolic link, a FIFO
    or device where a file belongs, a file over its size bound, or a name that leads out of
    the run. Refused before it is opened or followed (exit 65, like any damaged run)."""

    def __init__(self, path: str, what: str) -> None:
        StoreError.__init__(self, f"{path}: {what} (refused: the run directory is damaged)")
        self.seq = 0
        self.reason = what
        self.path = path


class BlobMissing(StoreError, RunCorrupt):
    def __init__(self, digest: str) -> None:
        super().__init__(f"blob missing: {digest}")
        self.digest = digest


class BlobCorrupt(StoreError, RunCorrupt):
    def __init__(self, digest: str, actual: str) -> None:
        super().__init__(f"blob {digest} hashes to {actual}")
        self.digest = digest
        self.actual = actual
