"""Running untrusted Python (code a model wrote) under bubblewrap: no network, a read-only
system, a private /tmp, a clean environment, CPU, wall, memory, file, process and output
limits. Nothing here ever runs code outside the sandbox: when bubblewrap is missing or cannot
start, :class:`solver.errors.SandboxUnavailable` says how to install it.

``limits`` holds the bounds, ``command`` the bubblewrap command line, ``probe`` finds the tool
and the Python inside, ``runner`` runs one program, ``result`` its typed record."""

from __future__ import annotations

from solver.sandbox.limits import DEFAULT_PYTHON, DEFAULT_SANDBOX_UID, Limits
from solver.sandbox.probe import SandboxVersion, sandbox_version
from solver.sandbox.result import Execution
from solver.sandbox.runner import run_python

__all__ = [
    "DEFAULT_PYTHON",
    "DEFAULT_SANDBOX_UID",
    "Execution",
    "Limits",
    "SandboxVersion",
    "run_python",
    "sandbox_version",
]
