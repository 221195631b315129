"""Finding bubblewrap and the Python inside the sandbox, and naming their versions.

The probe runs a real sandboxed program once per process and configuration: it is also the
check, before a run's first call, that the sandbox can start at all."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass

from solver.errors import SandboxUnavailable
from solver.sandbox.limits import DEFAULT_SANDBOX_UID, Limits
from solver.sandbox.process import INSTALL_HINT, execute

PROBE_PROGRAM = (
    "import sys\n"
    "print(sys.version.split()[0])\n"
    "try:\n"
    "    import sympy\n"
    "except ImportError:\n"
    "    print('')\n"
    "else:\n"
    "    print(sympy.__version__)\n"
)
PROBE_LIMITS = Limits(cpu_s=10, wall_s=30.0, output_bytes=4096)


@dataclass(frozen=True)
class SandboxVersion:
    bubblewrap: str  # `bwrap --version`: "bubblewrap 0.8.0"
    python: str  # the interpreter inside: "3.11.2"
    sympy: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def locate_bwrap(bwrap: str = "bwrap") -> str:
    """The bubblewrap executable's path, or SandboxUnavailable naming the install step."""
    found = shutil.which(bwrap)
    if found is None:
        raise SandboxUnavailable(f"bubblewrap ({bwrap}) is not installed: {INSTALL_HINT}")
    return found


def sandbox_uid(configured: int = DEFAULT_SANDBOX_UID) -> int | None:
    """The uid bubblewrap runs as: ``configured`` when we are root, else our own (None)."""
    return configured if os.geteuid() == 0 else None


@functools.lru_cache(maxsize=8)
def sandbox_version(
    bwrap: str = "bwrap", python: str = "/usr/bin/python3", uid: int = DEFAULT_SANDBOX_UID
) -> SandboxVersion:
    """The versions of bubblewrap and of the Python and sympy inside; raises
    SandboxUnavailable when the sandbox cannot run a program or its Python has no sympy."""
    path = locate_bwrap(bwrap)
    try:
        shown = subprocess.run(
            [path, "--version"], capture_output=True, env={}, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxUnavailable(f"{path} --version failed ({exc}): {INSTALL_HINT}") from None
    outcome = execute(
        PROBE_PROGRAM, PROBE_LIMITS, bwrap=path, python=python, sandbox_uid=sandbox_uid(uid)
    )
    lines = outcome.stdout.kept.decode("utf-8", errors="replace").splitlines()
    if outcome.exit != 0 or len(lines) != 2:
        detail = outcome.stderr.kept.decode("utf-8", errors="replace").strip()[-300:]
        raise SandboxUnavailable(
            f"the sandbox started but {python} did not run in it"
            f" (exit {outcome.exit}: {detail or 'no message'})"
        )
    if not lines[1]:
        raise SandboxUnavailable(
            f"{python} in the sandbox has no sympy: install it (Debian/Ubuntu: apt-get install"
            " python3-sympy, or `make sandbox`)"
        )
    return SandboxVersion(
        bubblewrap=shown.decode("utf-8", errors="replace").strip(),
        python=lines[0],
        sympy=lines[1],
    )
