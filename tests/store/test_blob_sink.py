"""The blob writer as the client's response sink: many small reads become few system calls,
and the digest the client computed can name the blob without hashing the bytes again."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from solver.store.blobs import WRITE_BUFFER, BlobStore
from solver.store.errors import StoreError

READS = [b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'] * 20_000  # ~1 MB


def count_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sizes: list[int] = []
    real = os.write

    def counted(fd: int, data: bytes | memoryview) -> int:
        sizes.append(len(data))
        return real(fd, data)

    monkeypatch.setattr(os, "write", counted)
    return sizes


def test_small_reads_are_gathered_into_large_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = BlobStore(tmp_path / "blobs")
    sizes = count_writes(monkeypatch)
    with store.writer() as writer:
        for data in READS:
            writer.write(data)
        ref = writer.commit()
    whole = b"".join(READS)
    assert len(sizes) <= len(whole) // WRITE_BUFFER + 1
    assert store.read(ref) == whole and ref.size == len(whole)
    assert ref.digest == "sha256:" + hashlib.sha256(whole).hexdigest()


def test_a_caller_that_hashes_names_the_blob(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "blobs")
    hasher = hashlib.sha256()
    with store.writer(hashed=False) as writer:
        for data in READS[:100]:
            writer.write(data)
            hasher.update(data)
        ref = writer.commit("sha256:" + hasher.hexdigest())
    assert store.read(ref) == b"".join(READS[:100])  # read() checks the name against the bytes


def test_a_wrong_or_missing_digest_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "blobs")
    with store.writer() as writer:
        writer.write(b"abc")
        with pytest.raises(StoreError, match="mismatch"):
            writer.commit("sha256:" + "0" * 64)
    with store.writer(hashed=False) as writer:
        writer.write(b"abc")
        with pytest.raises(StoreError, match="digest"):
            writer.commit()
    assert list(store.iter_files()) == [] and list(store.tmp.iterdir()) == []
