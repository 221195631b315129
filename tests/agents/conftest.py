"""Fixtures for the real-CLI tests: the pinned binary (skip, or fail under CI, when it is not
installed), and a home folder with nothing of the user's in it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.agents.clis import CLAUDE_CODE, CODEX, Cli, missing_reason


def _binary(cli: Cli) -> Path:
    reason = missing_reason(cli)
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI needs the npm registry for these tests")
        pytest.skip(reason)
    return cli.binary


@pytest.fixture
def claude_bin() -> Path:
    return _binary(CLAUDE_CODE)


@pytest.fixture
def codex_bin() -> Path:
    return _binary(CODEX)


@pytest.fixture
def agent_home(tmp_path: Path) -> Path:
    """HOME for one CLI run: its settings are only what `solver config` writes there."""
    home = tmp_path / "home"
    (home / "work").mkdir(parents=True)
    return home
