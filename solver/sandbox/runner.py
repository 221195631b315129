"""Run one Python program in the sandbox and return its typed record."""

from __future__ import annotations

import threading

from solver.sandbox.limits import DEFAULT_PYTHON, DEFAULT_SANDBOX_UID, Limits
from solver.sandbox.probe import locate_bwrap, sandbox_uid, sandbox_version
from solver.sandbox.process import execute
from solver.sandbox.result import Execution, killed_reason_for


def run_python(
    code: str,
    limits: Limits | None = None,
    *,
    bwrap: str = "bwrap",
    python: str = DEFAULT_PYTHON,
    uid: int = DEFAULT_SANDBOX_UID,
    cancel: threading.Event | None = None,
) -> Execution:
    """Run ``code`` under ``limits``; raises SandboxUnavailable (never runs it unsandboxed)
    when bubblewrap is missing or cannot start. ``cancel`` set from another thread kills it
    (recorded as a wall-time kill)."""
    limits = limits or Limits()
    version = sandbox_version(bwrap, python, uid)
    outcome = execute(
        code,
        limits,
        bwrap=locate_bwrap(bwrap),
        python=python,
        sandbox_uid=sandbox_uid(uid),
        cancel=cancel,
    )
    return Execution(
        stdout=outcome.stdout,
        stderr=outcome.stderr,
        exit=outcome.exit,
        timed_out=outcome.timed_out,
        killed_reason=killed_reason_for(outcome.exit, outcome.timed_out, outcome.cpu_s, limits),
        wall_s=outcome.wall_s,
        cpu_s=outcome.cpu_s,
        limits=limits,
        sandbox=version.as_dict(),
    )
