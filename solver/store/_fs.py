"""Durable file primitives shared by the store: canonical JSON, atomic replace, directory
fsync, ENOSPC mapping, and the crash-point hook the crash-matrix tests use.

Crash points: when the environment variable ``SOLVER_STORE_CRASH_AT`` is ``"<step>:<n>"``, the
process kills itself with SIGKILL the n-th time it reaches ``<step>`` (n defaults to 1). The
steps are listed in :data:`CRASH_POINTS`. Unset, the hook costs one dict lookup.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from solver._util import fs as atomic
from solver._util.fs import fsync_dir as fsync_dir  # re-exported: tests watch syncs here
from solver.errors import StorageFull, no_room
from solver.store.errors import StoreError, UnsafeEntry

CRASH_ENV = "SOLVER_STORE_CRASH_AT"
CRASH_POINTS = (
    "atomic.write",
    "atomic.fsync",
    "atomic.rename",
    "atomic.dirsync",
    "blob.write",
    "blob.fsync",
    "blob.rename",
    "blob.dirsync",
    "journal.torn",
    "journal.write",
    "journal.fsync",
    "repair.quarantined",
    "repair.truncated",
)
_crash_hits: dict[str, int] = {}


def crash_armed(step: str) -> bool:
    """True when this is the visit of ``step`` at which the crash matrix wants to die."""
    spec = os.environ.get(CRASH_ENV)
    if spec is None:
        return False
    name, _, nth = spec.partition(":")
    if name != step:
        return False
    _crash_hits[step] = _crash_hits.get(step, 0) + 1
    return _crash_hits[step] == int(nth or "1")


def die() -> None:
    """Kill this process the way a power cut or OOM kill would: no cleanup, no flush."""
    os.kill(os.getpid(), signal.SIGKILL)  # pragma: no cover - nothing runs after it


def crash_point(step: str) -> None:
    if crash_armed(step):
        die()  # pragma: no cover - the process is gone


def canonical_json(obj: Any) -> bytes:
    """Sorted keys, compact separators, UTF-8 (not ASCII-escaped), no NaN or Infinity."""
    try:
        text = json.dumps(
            obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
        return text.encode("utf-8")
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        raise StoreError(f"value is not canonical JSON: {exc}") from None


def sha256_tag(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@contextlib.contextmanager
def storage_errors(path: Path) -> Iterator[None]:
    """Turn a full disk or an oversized file into one clear :class:`StorageFull`."""
    try:
        yield
    except OSError as exc:
        if no_room(exc):
            raise StorageFull(str(path), exc) from None
        raise


# Bounds on what a reader takes from a run directory (a hostile run may hold anything).
MAX_MANIFEST_BYTES = 64 << 20
MAX_SMALL_FILE_BYTES = 1 << 20  # .lock, seals, result.json
MAX_JOURNAL_BYTES = 1 << 36
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def open_regular(path: Path, limit: int) -> BinaryIO:
    """A binary file object on ``path``, which must be a regular file (not a symlink, FIFO
    or device: a FIFO blocks a reader forever and /dev/zero never ends) of at most ``limit``
    bytes. FileNotFoundError passes through; anything else is :class:`UnsafeEntry`."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeEntry(str(path), "is a symbolic link") from None
        if exc.errno == errno.ENOENT:
            raise FileNotFoundError(exc.errno, exc.strerror, str(path)) from None
        if exc.errno == errno.ENOTDIR:
            raise UnsafeEntry(str(path), "lies under an entry that is not a directory") from None
        if exc.errno == errno.EISDIR:
            raise UnsafeEntry(str(path), "is a directory, not a file") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeEntry(str(path), "is not a regular file")
        if info.st_size > limit:
            raise UnsafeEntry(str(path), f"is {info.st_size} bytes, over its {limit}-byte bound")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (see :func:`open_regular`);
    a file that grows past the bound while it is read is refused as well."""
    with open_regular(path, limit) as handle:
        size = os.fstat(handle.fileno()).st_size
        parts = [handle.read(size + 1)]  # one read for the usual case; more if it grew
        total = len(parts[0])
        while total > size and total <= limit:
            chunk = handle.read(1 << 20)
            if not chunk:
                break
            parts.append(chunk)
            total += len(chunk)
        data = parts[0] if len(parts) == 1 else b"".join(parts)
    if len(data) > limit:
        raise UnsafeEntry(str(path), f"grew over its {limit}-byte bound while read")
    return data


def read_regular_or_empty(path: Path, limit: int) -> bytes:
    try:
        return read_regular(path, limit)
    except FileNotFoundError:
        return b""


def check_entry(path: Path, kind: str) -> None:
    """Refuse an existing ``path`` that is a symlink or not of ``kind`` ("file" or "dir"):
    the writer must never follow a link planted in the run to a file outside it."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise UnsafeEntry(str(path), "lies under an entry that is not a directory") from None
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeEntry(str(path), "is a symbolic link")
    wanted = stat.S_ISDIR if kind == "dir" else stat.S_ISREG
    if not wanted(info.st_mode):
        raise UnsafeEntry(str(path), f"is not a {'directory' if kind == 'dir' else 'regular file'}")


def make_dirs(path: Path) -> None:
    """``mkdir -p`` whose new entries survive a power cut: each directory it creates is
    followed by an fsync of its parent (a rename into an unsynced directory can vanish)."""
    missing: list[Path] = []
    current = path
    while not current.is_dir():
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        try:
            directory.mkdir()
        except FileExistsError:
            if not directory.is_dir():
                raise
        fsync_dir(directory.parent)


def write_atomic(path: Path, data: bytes, *, backup: bool = False) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new file
    (:func:`solver._util.fs.write_atomic`, with the store's crash points and its full-disk
    error). ``backup`` first keeps the old content as ``<name>.bak`` (itself atomic)."""
    if backup and path.exists():
        write_atomic(path.with_name(path.name + ".bak"), read_regular(path, MAX_MANIFEST_BYTES))
    with storage_errors(path):
        # fsync_dir is looked up here at call time, so tests can watch directory syncs.
        atomic.write_atomic(path, data, step=crash_point, sync_dir=lambda d: fsync_dir(d))


def remove_temp_files(directory: Path) -> list[Path]:
    """Delete the leftovers of writes a crash interrupted (only the writer calls this)."""
    removed: list[Path] = []
    check_entry(directory, "dir")  # a symlinked final/ must not lose someone else's files
    if directory.is_dir():
        for entry in directory.iterdir():
            if (
                entry.name.startswith(".")
                and entry.name.endswith(".tmp")
                and entry.is_file()
                and not entry.is_symlink()
            ):
                entry.unlink()
                removed.append(entry)
    return removed
