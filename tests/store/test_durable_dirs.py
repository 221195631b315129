"""Every directory the store creates is made durable in its parent before anything lands in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.store import RunStore
from solver.store import _fs as store_fs

from .conftest import MANIFEST, Keys

Sync = tuple[Path, frozenset[str]]


@pytest.fixture
def syncs(monkeypatch: pytest.MonkeyPatch) -> list[Sync]:
    """Each directory fsync, with the subdirectories it held at that moment."""
    seen: list[Sync] = []
    real = store_fs.fsync_dir

    def recording(path: Path) -> None:
        children = frozenset(p.name for p in Path(path).iterdir() if p.is_dir())
        seen.append((Path(path), children))
        real(path)

    monkeypatch.setattr(store_fs, "fsync_dir", recording)
    return seen


def synced_into_parent_first(syncs: list[Sync], directory: Path) -> bool:
    """The parent was fsynced holding ``directory`` before ``directory`` itself was fsynced
    (which happens once a file was renamed into it)."""
    first_own = next((i for i, (path, _) in enumerate(syncs) if path == directory), len(syncs))
    return any(
        path == directory.parent and directory.name in held for path, held in syncs[:first_own]
    )


def test_new_directories_are_synced_into_their_parents(
    tmp_path: Path, keys: Keys, syncs: list[Sync]
) -> None:
    run_dir = tmp_path / "runs" / "one"
    with RunStore.create(run_dir, MANIFEST, signing_key=keys.private, blobs=[b"x"]) as store:
        store.append("a", {})
        store.write_final("proof.md", b"proof")
        store.seal()
    with (run_dir / "journal.jsonl").open("ab") as handle:
        handle.write(b'{"torn')
    RunStore.open(run_dir, signing_key=keys.private).close()
    for directory in (
        run_dir,
        run_dir / "blobs",
        run_dir / "blobs" / "sha256",
        run_dir / "blobs" / "tmp",
        run_dir / "seals",
        run_dir / "final",
        run_dir / "quarantine",
    ):
        assert synced_into_parent_first(syncs, directory), directory
