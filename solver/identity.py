"""Who ran a run: code identity, host, run ids. Recorded in the manifest and each session."""

from __future__ import annotations

import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from solver import __version__
from solver._util.ids import uuid7

_DEPENDENCIES = (
    "httpx",
    "pydantic",
    "jinja2",
    "tenacity",
    "sympy",
    "openai",
    "anthropic",
    "cryptography",
    "click",
    "rich",
)


def new_run_id() -> str:
    """A time-ordered run id (UUIDv7)."""
    return uuid7()


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(
            # Never write the index: a solver killed by its timeout (or with no room to
            # write) would leave .git/index.lock behind and block every commit.
            ["git", "--no-optional-locks", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def code_identity() -> dict[str, Any]:
    source = Path(__file__).resolve().parent.parent
    commit = _git(["rev-parse", "HEAD"], source)
    identity: dict[str, Any] = {
        "package": "olympiad-solver",
        "version": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "dependencies": {},
    }
    if commit:
        status = _git(["status", "--porcelain", "--untracked-files=no"], source)
        identity["git"] = {"commit": commit, "dirty": bool(status)}
    for name in _DEPENDENCIES:
        try:
            identity["dependencies"][name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return identity


def host_name() -> str:
    return socket.gethostname()
