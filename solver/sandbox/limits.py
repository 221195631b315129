"""The bounds of one sandboxed execution.

CPU time, address space, file size and the number of processes are rlimits, set by
util-linux's ``prlimit`` inside the sandbox just before the interpreter starts (see
``command``); the wall time is the runner's own deadline; /tmp is a tmpfs of ``tmp_mb``; the
output is cut by the runner while it reads the pipes."""

from __future__ import annotations

from dataclasses import asdict, dataclass

# Debian's interpreter with Debian's python3-sympy (the Makefile installs both): only /usr is
# bound into the sandbox, and the version inside is the distribution's, recorded with each
# execution.
DEFAULT_PYTHON = "/usr/bin/python3"
# The uid the sandbox runs as when the orchestrator is root: root's own processes are exempt
# from RLIMIT_NPROC (the kernel checks the user, not the namespace), so a fork bomb would only
# meet the machine's limits. 65534 is the conventional "nobody".
DEFAULT_SANDBOX_UID = 65534


@dataclass(frozen=True)
class Limits:
    cpu_s: int = 10  # CPU seconds of each process (RLIMIT_CPU; the program is killed 1 s on)
    wall_s: float = 20.0  # the whole execution, start-up included; then everything is killed
    memory_mb: int = 1024  # address space of each process (RLIMIT_AS)
    file_mb: int = 16  # the largest file a process may write (RLIMIT_FSIZE)
    tmp_mb: int = 64  # the private /tmp, a tmpfs of this size (and /dev/shm another)
    processes: int = 32  # processes inside the sandbox, the program's own included
    output_bytes: int = 65536  # kept of stdout and of stderr each; the rest is counted, dropped

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not value > 0:
                raise ValueError(f"sandbox limit {name} must be positive, not {value}")

    def as_dict(self) -> dict[str, int | float]:
        return asdict(self)
