"""The shared fixture skips a missing build only outside CI; in CI it fails loudly."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.local import SERVER_BINARY_ENV
from tests.local_server import _start


@pytest.fixture
def no_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    monkeypatch.delenv(SERVER_BINARY_ENV, raising=False)


def test_missing_build_skips_outside_ci(
    no_build: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="solver local install"):
        _start(tmp_path)


def test_missing_build_fails_in_ci(
    no_build: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="not built"):
        _start(tmp_path)


def test_a_server_that_cannot_start_fails_even_outside_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "llama-server"
    broken.write_text("#!/bin/sh\necho 'cannot load model'; exit 1\n")
    broken.chmod(0o755)
    monkeypatch.setenv(SERVER_BINARY_ENV, str(broken))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.fail.Exception, match="cannot load model"):
        _start(tmp_path)
