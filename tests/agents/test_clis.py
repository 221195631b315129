"""The install step's bookkeeping: where each pinned CLI lives and why it is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents import clis


def test_each_pin_gets_its_own_folder_and_a_missing_one_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cli = clis.Cli("@scope/tool", "1.2.3", "tool")
    assert cli.folder == tmp_path / "olympiad-solver" / "npm" / "scope-tool-1.2.3"
    assert "not installed" in clis.missing_reason(cli)
    cli.folder.parent.mkdir(parents=True)
    (cli.folder.parent / "scope-tool-1.2.3.failed").write_text("registry unreachable\n")
    assert "registry unreachable" in clis.missing_reason(cli)
    cli.binary.parent.mkdir(parents=True)
    cli.binary.write_text("#!/bin/sh\n")
    cli.binary.chmod(0o755)
    assert clis.missing_reason(cli) == ""
    assert len({c.folder for c in clis.PINNED}) == len(clis.PINNED)
