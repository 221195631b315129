"""The one atomic write: temp file, fsync, rename, fsync of the directory, so a crash leaves
either the old file or the new one, never a torn mix."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path

__all__ = ["fsync_dir", "temp_name", "write_all", "write_atomic"]


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a rename into it, a new file) survive a power cut."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """os.write may write less than asked (signals, pipes); loop until every byte is out."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def temp_name(path: Path) -> Path:
    """A hidden sibling (``.<name>.<random>.tmp``) that writers' cleanup can recognise."""
    return path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")


def _no_step(step: str) -> None:
    pass


def write_atomic(
    path: Path,
    data: bytes,
    *,
    mode: int = 0o644,
    step: Callable[[str], None] = _no_step,
    sync_dir: Callable[[Path], None] = fsync_dir,
) -> None:
    """Replace ``path`` with ``data``. ``step`` is called after each stage (``atomic.write``,
    ``.fsync``, ``.rename``, ``.dirsync``): the store's crash tests stop the process there.
    The temp file is created exclusively and never through a symlink."""
    tmp = temp_name(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        try:
            write_all(fd, data)
            step("atomic.write")
            os.fsync(fd)
            step("atomic.fsync")
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    step("atomic.rename")
    sync_dir(path.parent)
    step("atomic.dirsync")
