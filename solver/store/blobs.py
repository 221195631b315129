"""Content-addressed blobs: raw bytes stored at ``blobs/sha256/<hex[:2]>/<hex>``.

A blob is durable before its name is returned (temp file, fsync, rename, fsync of the fan-out
directory), so no journal record can ever name bytes that a crash could lose. Large blobs are
hashed while they are written and never held whole in memory; writes are gathered into
``WRITE_BUFFER`` bytes per system call (a stream arrives in many small reads). A writer made
with ``hashed=False`` leaves the hashing to a caller that already hashes the same bytes (the
model client does) and takes the digest at ``commit``.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

from solver._util.fs import temp_name
from solver.store._fs import check_entry, crash_point, fsync_dir, open_regular, storage_errors
from solver.store.errors import BlobCorrupt, BlobMissing, StoreError, UnsafeEntry

_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")
READ_CHUNK = 1 << 20
WRITE_BUFFER = 256 << 10
# No blob is larger than this (a model response is megabytes); a bigger file is refused
# before it is read, and a blob read whole is also held to the size its record gives.
MAX_BLOB_BYTES = 1 << 34


@dataclass(frozen=True, slots=True)
class BlobRef:
    """The name of a stored blob: ``digest`` is ``"sha256:<hex>"``, ``size`` its byte count."""

    digest: str
    size: int

    def __post_init__(self) -> None:
        parse_digest(self.digest)

    @property
    def hex(self) -> str:
        return self.digest.removeprefix("sha256:")

    def as_ref(self) -> dict[str, Any]:
        """The form records use to name a blob: ``{"blob": digest, "bytes": size}``."""
        return {"blob": self.digest, "bytes": self.size}


def parse_digest(digest: str) -> str:
    """The hex part of ``"sha256:<64 lowercase hex>"``; anything else is a StoreError."""
    match = _DIGEST.fullmatch(digest)
    if match is None:
        raise StoreError(f"not a sha256 digest: {digest!r}")
    return match.group(1)


def iter_blob_refs(value: Any) -> Iterator[str]:
    """Every digest named by a ``{"blob": "sha256:..."}`` object anywhere inside ``value``,
    in document order."""
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is dict:
            named = item.get("blob")
            if type(named) is str and named.startswith("sha256:"):
                yield named
            stack.extend(reversed([v for v in item.values() if type(v) in (dict, list)]))
        elif type(item) is list:
            stack.extend(reversed([v for v in item if type(v) in (dict, list)]))


def hash_file(path: Path, buffer: bytearray | None = None) -> tuple[str, int]:
    """(``"sha256:<hex>"``, size) of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    buf = buffer if buffer is not None else bytearray(READ_CHUNK)
    view = memoryview(buf)
    size = 0
    with open_regular(path, MAX_BLOB_BYTES) as handle:
        assert isinstance(handle, io.BufferedReader)
        while True:
            count = handle.readinto(view)
            if not count:
                break
            digest.update(view[:count])
            size += count
    return "sha256:" + digest.hexdigest(), size


class BlobStore:
    """The ``blobs/`` directory of one run. Reading needs nothing else; writing is done only
    by the run's single writer (the temp directory is cleaned when it opens the run)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tree = root / "sha256"
        self.tmp = root / "tmp"
        self._known: set[str] = set()  # seen to exist
        self._durable: set[str] = set()  # made durable (or confirmed so) by this process

    def path_for(self, digest: str) -> Path:
        hex_digest = parse_digest(digest)
        return self.tree / hex_digest[:2] / hex_digest

    def exists(self, digest: str) -> bool:
        if digest in self._known:
            return True
        path = self.path_for(digest)
        check_entry(path.parent, "dir")
        check_entry(path, "file")
        if path.is_file():
            self._known.add(digest)
            return True
        return False

    def read(self, ref: BlobRef | str) -> bytes:
        """The blob's bytes, checked against its name (and its size, when ``ref`` gives one:
        a file bigger than its record says is refused before it is read)."""
        digest = ref.digest if isinstance(ref, BlobRef) else ref
        limit = ref.size if isinstance(ref, BlobRef) else MAX_BLOB_BYTES
        path = self.path_for(digest)
        check_entry(path.parent, "dir")
        try:
            with open_regular(path, limit) as handle:
                data = handle.read(min(limit, os.fstat(handle.fileno()).st_size) + 1)
        except FileNotFoundError:
            raise BlobMissing(digest) from None
        except UnsafeEntry as exc:
            if "bound" in exc.reason:  # oversized: its content cannot hash to its name
                raise BlobCorrupt(digest, "a file over the recorded size") from None
            raise
        actual = "sha256:" + hashlib.sha256(data).hexdigest()
        if actual != digest:
            raise BlobCorrupt(digest, actual)
        return data

    def open(self, ref: BlobRef | str) -> BinaryIO:
        """A binary file object on the blob (unchecked; for streaming large blobs)."""
        digest = ref.digest if isinstance(ref, BlobRef) else ref
        path = self.path_for(digest)
        check_entry(path.parent, "dir")
        try:
            return open_regular(path, MAX_BLOB_BYTES)
        except FileNotFoundError:
            raise BlobMissing(digest) from None

    def writer(self, *, hashed: bool = True) -> BlobWriter:
        return BlobWriter(self, hashed=hashed)

    def put(self, data: bytes) -> BlobRef:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if digest in self._durable:
            return BlobRef(digest, len(data))
        if self.exists(digest):
            self._confirm_durable(digest)
            return BlobRef(digest, len(data))
        with self.writer(hashed=False) as writer:  # hashed just above
            writer.write(data)
            return writer.commit(digest)

    def iter_files(self) -> Iterator[Path]:
        """Every file in the fan-out tree, whatever its name (the audit judges the names)."""
        check_entry(self.tree, "dir")
        if not self.tree.is_dir():
            return
        for fan in sorted(self.tree.iterdir()):
            if fan.is_dir() and not fan.is_symlink():
                yield from sorted(fan.iterdir())
            else:
                yield fan

    def _install(self, tmp: Path, digest: str) -> None:
        target = self.path_for(digest)
        fan = target.parent
        if not fan.is_dir():
            fan.mkdir(parents=True, exist_ok=True)
            fsync_dir(self.tree)
        if target.exists():  # same name, same bytes: content addressing makes this a no-op
            tmp.unlink()
            self._confirm_durable(digest)
        else:
            os.replace(tmp, target)
            crash_point("blob.rename")
            fsync_dir(fan)
            crash_point("blob.dirsync")
        self._known.add(digest)
        self._durable.add(digest)

    def _confirm_durable(self, digest: str) -> None:
        """A blob found on disk may be the rename of a process that died before its
        directory fsync; sync it once before this process lets a record name it."""
        if digest in self._durable:
            return
        target = self.path_for(digest)
        check_entry(target, "file")
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(target.parent)
        self._known.add(digest)
        self._durable.add(digest)


class BlobWriter:
    """Streams one blob to a temp file, hashing as it goes; ``commit()`` makes it durable and
    returns its name, ``abort()`` drops it. As a context manager it aborts on an exception or
    when left without a commit. With ``hashed=False`` the caller hashes the bytes it writes
    and must pass their digest to ``commit``; otherwise a digest passed there is checked."""

    def __init__(self, store: BlobStore, *, hashed: bool = True) -> None:
        self._store = store
        store.tmp.mkdir(parents=True, exist_ok=True)
        self._path = temp_name(store.tmp / "blob")
        with storage_errors(self._path):
            self._fd: int | None = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self._hash = hashlib.sha256() if hashed else None
        self._size = 0
        self._buffer = bytearray()

    def write(self, data: bytes) -> None:
        fd = self._fd
        if fd is None:
            raise StoreError("blob writer is closed")
        if self._hash is not None:
            self._hash.update(data)
        self._size += len(data)
        if not self._buffer and len(data) >= WRITE_BUFFER:
            self._write(fd, data)  # already large: no copy
            return
        self._buffer += data
        if len(self._buffer) >= WRITE_BUFFER:
            self._flush(fd)

    def _flush(self, fd: int) -> None:
        if self._buffer:
            buffer, self._buffer = self._buffer, bytearray()
            self._write(fd, buffer)

    def _write(self, fd: int, data: bytes | bytearray) -> None:
        with storage_errors(self._path):
            view = memoryview(data)
            while view:  # os.write may write less than asked
                view = view[os.write(fd, view) :]

    def commit(self, digest: str | None = None) -> BlobRef:
        """Durable, then named. ``digest`` (``"sha256:<hex>"``) is the caller's hash of every
        byte written: required when the writer does not hash, checked when it does."""
        if self._fd is None:
            raise StoreError("blob writer is closed")
        if self._hash is not None:
            name = "sha256:" + self._hash.hexdigest()
            if digest is not None and digest != name:
                self.abort()
                raise StoreError(f"blob digest mismatch: given {digest}, written {name}")
        elif digest is None:
            self.abort()
            raise StoreError("a blob writer with hashed=False needs the digest at commit")
        else:
            parse_digest(digest)
            name = digest
        fd, self._fd = self._fd, None
        try:
            with storage_errors(self._path):
                try:
                    self._flush(fd)
                    crash_point("blob.write")
                    os.fsync(fd)
                    crash_point("blob.fsync")
                finally:
                    os.close(fd)
                self._store._install(self._path, name)
        except BaseException:
            self._path.unlink(missing_ok=True)
            raise
        return BlobRef(name, self._size)

    def abort(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self._buffer = bytearray()
            self._path.unlink(missing_ok=True)

    def __enter__(self) -> BlobWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.abort()
