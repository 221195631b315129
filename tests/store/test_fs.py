"""Canonical JSON, atomic replace, ENOSPC mapping and the crash-point counter."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from solver.errors import exit_code_for
from solver.store import StorageFull, StoreError, canonical_json, write_atomic
from solver.store import _fs as store_fs
from solver.store._fs import CRASH_ENV, crash_armed, remove_temp_files, storage_errors


def test_canonical_json_is_sorted_compact_utf8() -> None:
    assert canonical_json({"b": [1, 2.5], "a": "é∎"}) == '{"a":"é∎","b":[1,2.5]}'.encode()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), object(), "\udc80"])
def test_canonical_json_refuses_what_has_no_canonical_form(value: object) -> None:
    with pytest.raises(StoreError, match="not canonical JSON"):
        canonical_json({"x": value})


def test_write_atomic_replaces_and_keeps_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    write_atomic(path, b"one")
    write_atomic(path, b"two", backup=True)
    assert path.read_bytes() == b"two"
    assert (tmp_path / "config.toml.bak").read_bytes() == b"one"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml", "config.toml.bak"]


def test_write_atomic_cleans_up_when_the_write_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(StorageFull, match="disk full") as caught:
        write_atomic(tmp_path / "x", b"data")
    assert exit_code_for(caught.value) == 74
    assert list(tmp_path.iterdir()) == []


def test_storage_errors_maps_only_full_disks(tmp_path: Path) -> None:
    with pytest.raises(StorageFull, match="file too large"), storage_errors(tmp_path):
        raise OSError(errno.EFBIG, "File too large")
    with pytest.raises(PermissionError), storage_errors(tmp_path):
        raise PermissionError(errno.EACCES, "Permission denied")


def test_crash_points_count_visits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_fs, "_crash_hits", {})
    monkeypatch.delenv(CRASH_ENV, raising=False)
    assert not crash_armed("journal.write")
    monkeypatch.setenv(CRASH_ENV, "journal.write:3")
    assert [crash_armed("journal.write") for _ in range(4)] == [False, False, True, False]
    assert not crash_armed("blob.write")


def test_remove_temp_files_leaves_other_files(tmp_path: Path) -> None:
    (tmp_path / ".a.123.tmp").write_bytes(b"")
    (tmp_path / "keep.tmp").write_bytes(b"")
    (tmp_path / ".hidden").write_bytes(b"")
    assert [p.name for p in remove_temp_files(tmp_path)] == [".a.123.tmp"]
    assert remove_temp_files(tmp_path / "missing") == []
