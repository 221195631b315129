"""The sandbox tests need bubblewrap and Debian's python3-sympy (`make sandbox` installs both):
without them they skip, or fail under CI."""

from __future__ import annotations

import os

import pytest

from solver.errors import SandboxUnavailable
from solver.sandbox import SandboxVersion, sandbox_version


@pytest.fixture(scope="session")
def sandbox_ready() -> SandboxVersion:
    try:
        return sandbox_version()
    except SandboxUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{exc}; CI installs it with `make sandbox`")
        pytest.skip(str(exc))
