"""What one sandboxed execution gave: its output (cut to a bound, and saying so), its exit, why
it was killed, how long it took, under which limits and in which sandbox."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Any

from solver.sandbox.limits import Limits

# The reasons the sandbox, not the program, ended an execution.
KILLED_WALL_TIME = "wall_time"
KILLED_CPU_TIME = "cpu_time"


@dataclass(frozen=True)
class Stream:
    """One output stream: the first ``Limits.output_bytes`` of it, and how long it was."""

    kept: bytes
    total_bytes: int

    @property
    def truncated(self) -> bool:
        return self.total_bytes > len(self.kept)

    @property
    def text(self) -> str:
        shown = self.kept.decode("utf-8", errors="replace")
        if self.truncated:
            shown += (
                f"\n[output truncated: {self.total_bytes} bytes, the first {len(self.kept)} kept]"
            )
        return shown


@dataclass(frozen=True)
class Execution:
    stdout: Stream
    stderr: Stream
    exit: int | None  # the program's exit status; 128 + N when signal N ended it; None if killed
    timed_out: bool
    killed_reason: str | None  # KILLED_WALL_TIME, KILLED_CPU_TIME, "signal SIGNAME" or None
    wall_s: float
    # user + system time of the program and the children it waited for; None when killed at
    # the wall deadline (bubblewrap never reaped it)
    cpu_s: float | None
    limits: Limits
    sandbox: dict[str, str]  # SandboxVersion.as_dict(): bubblewrap, python, sympy

    def as_json(self) -> dict[str, Any]:
        """The record `solver tool run --json` prints and a tool result carries."""
        return {
            "stdout": self.stdout.text,
            "stderr": self.stderr.text,
            "stdout_bytes": self.stdout.total_bytes,
            "stderr_bytes": self.stderr.total_bytes,
            "stdout_truncated": self.stdout.truncated,
            "stderr_truncated": self.stderr.truncated,
            "exit": self.exit,
            "timed_out": self.timed_out,
            "killed_reason": self.killed_reason,
            "wall_s": round(self.wall_s, 3),
            "cpu_s": None if self.cpu_s is None else round(self.cpu_s, 3),
            "limits": self.limits.as_dict(),
            "sandbox": dict(self.sandbox),
        }


def killed_reason_for(
    exit_code: int | None, timed_out: bool, cpu_s: float | None, limits: Limits
) -> str | None:
    """Why the sandbox ended the program, from bubblewrap's exit code (128 + the signal): the
    program, its namespace's init, meets the CPU limit as SIGKILL (it ignores SIGXCPU)."""
    if timed_out:
        return KILLED_WALL_TIME
    if exit_code is None or exit_code <= 128:
        return None
    number = exit_code - 128
    if number == signal.SIGXCPU or (
        number == signal.SIGKILL and cpu_s is not None and cpu_s >= limits.cpu_s
    ):
        return KILLED_CPU_TIME
    try:
        return f"signal {signal.Signals(number).name}"
    except ValueError:
        return None
