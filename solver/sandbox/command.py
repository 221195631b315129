"""The bubblewrap command line of one execution (bubblewrap(1) names every option used here).

The sandbox sees only /usr (read-only, with the usual /bin, /lib, /lib64 links), a fresh /proc
of its own PID namespace, a minimal read-only /dev, a private /tmp and /dev/shm of ``tmp_mb``
each and the program at
PROGRAM_PATH; everything else (/etc, /home, /root, /run, the run directory) is absent, and
the root itself is read-only. Every namespace is new: no network at all (its own loopback,
which reaches nothing outside), no other process, no IPC, its own hostname, a user namespace
that may not make more. The environment is cleared and only SANDBOX_ENV set: no variable of
the orchestrator (an API key) reaches the code."""

from __future__ import annotations

from solver.sandbox.limits import Limits

PROGRAM_PATH = "/sandbox/main.py"
WORK_DIR = "/tmp"
# PYTHONHASHSEED fixed: a set's iteration order is then the same when the audit re-runs it.
SANDBOX_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": WORK_DIR,
    "LANG": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
}
# The links of a merged-/usr system, made inside whether or not the host has them as links.
USR_LINKS = (("usr/bin", "/bin"), ("usr/lib", "/lib"), ("usr/lib64", "/lib64"))
MB = 1024 * 1024
# SIGKILL this long after SIGXCPU: a namespace's init ignores SIGXCPU (no handler), so the
# program itself meets the hard limit; the processes it starts meet SIGXCPU first
CPU_HARD_MARGIN_S = 1


def bwrap_argv(
    bwrap: str,
    python: str,
    limits: Limits,
    *,
    program_fd: int,
    status_fd: int,
    script: str = PROGRAM_PATH,
) -> list[str]:
    """The argv that runs ``script`` (copied in from ``program_fd``) with ``python`` under
    ``limits``; bubblewrap reports the sandbox's pid and the exit code as JSON on
    ``status_fd``."""
    argv = [
        bwrap,
        "--unshare-all",
        "--unshare-user",  # explicit: --unshare-all only tries it
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        # the program is the namespace's init, so bubblewrap reaps it and its CPU time
        # reaches our wait4 (bubblewrap's own init would keep it); when it exits, the kernel
        # kills whatever it left behind
        "--as-pid-1",
        "--hostname",
        "sandbox",
        "--clearenv",
    ]
    for name, value in SANDBOX_ENV.items():
        argv += ["--setenv", name, value]
    argv += ["--ro-bind", "/usr", "/usr"]
    for target, link in USR_LINKS:
        argv += ["--symlink", target, link]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    # /tmp and /dev/shm (multiprocessing's semaphores) are the only writable places, each a
    # tmpfs of tmp_mb; the rest of /dev is read-only, or files there would have no bound
    for tmpfs in (WORK_DIR, "/dev/shm"):
        argv += ["--size", str(limits.tmp_mb * MB), "--tmpfs", tmpfs]
    argv += ["--remount-ro", "/dev"]
    argv += ["--perms", "0444", "--ro-bind-data", str(program_fd), script]
    argv += ["--remount-ro", "/", "--chdir", WORK_DIR]
    argv += ["--json-status-fd", str(status_fd)]
    # -s, not -I: -I would ignore PYTHONHASHSEED, and the environment is ours alone anyway
    argv += ["--", *prlimit_argv(limits), python, "-s", script]
    return argv


def prlimit_argv(limits: Limits) -> list[str]:
    """util-linux's prlimit, run inside the sandbox, so the process limit counts the sandbox's
    user in its own namespace: set outside, before the namespace, it would count every
    process of that user on the machine."""
    memory = limits.memory_mb * MB
    files = limits.file_mb * MB
    return [
        "/usr/bin/prlimit",
        f"--cpu={limits.cpu_s}:{limits.cpu_s + CPU_HARD_MARGIN_S}",
        f"--as={memory}:{memory}",
        f"--fsize={files}:{files}",
        f"--nproc={limits.processes}:{limits.processes}",
        "--core=0:0",
        "--",
    ]
