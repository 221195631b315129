"""One bubblewrap process: started with nothing of ours (no environment, no descriptors but
the program and the status pipe), read with bounded buffers, killed whole at its deadline.

Killing bubblewrap kills the sandbox: ``--die-with-parent`` gives the program (the init of
its PID namespace) SIGKILL when bubblewrap dies, and the kernel then kills every process of
the namespace, however it detached itself (``setsid``, a double fork). The same happens when
the program's main process exits of itself."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import threading
import time
from dataclasses import dataclass

from solver._util.fs import write_all
from solver.errors import SandboxUnavailable
from solver.sandbox.command import bwrap_argv
from solver.sandbox.limits import Limits
from solver.sandbox.result import Stream

READ_CHUNK = 65536
# After the deadline's SIGKILL, how long the pipes may take to close (they close at once: the
# writers are dead) before the runner stops waiting on them.
DRAIN_AFTER_KILL_S = 2.0
# How often a cancellable execution looks whether it was cancelled
CANCEL_POLL_S = 0.1
# bubblewrap's message when it cannot set up the sandbox is at most this much of its stderr
MAX_SETUP_MESSAGE = 300
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap, or `make sandbox`) "
    "and allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 on "
    "Debian; on Ubuntu 24.04 and later, an AppArmor profile for bwrap or sysctl "
    "kernel.apparmor_restrict_unprivileged_userns=0)"
)


@dataclass(frozen=True)
class Outcome:
    stdout: Stream
    stderr: Stream
    exit: int | None
    timed_out: bool
    wall_s: float
    cpu_s: float | None


class _Capture:
    """The first ``limit`` bytes of a stream; the rest only counted."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        room = self.limit - len(self.kept)
        if room > 0:
            self.kept += chunk[:room]
        self.total += len(chunk)

    def stream(self) -> Stream:
        return Stream(kept=bytes(self.kept), total_bytes=self.total)


def execute(
    code: str,
    limits: Limits,
    *,
    bwrap: str,
    python: str,
    sandbox_uid: int | None,
    cancel: threading.Event | None = None,
) -> Outcome:
    """Run ``code`` with ``python`` in the sandbox. ``sandbox_uid``: the user bubblewrap runs as
    (needed when we are root, see limits.DEFAULT_SANDBOX_UID), None to stay who we are.
    ``cancel``, once set, kills the sandbox as the deadline would (the run's own deadline or a
    cancelled call, from another thread)."""
    program_fd = os.memfd_create("solver-program")
    status_read, status_write = os.pipe()
    try:
        write_all(program_fd, code.encode("utf-8"))
        os.lseek(program_fd, 0, os.SEEK_SET)
        argv = bwrap_argv(bwrap, python, limits, program_fd=program_fd, status_fd=status_write)
        drop: dict[str, object] = {}
        if sandbox_uid is not None:
            drop = {"user": sandbox_uid, "group": sandbox_uid, "extra_groups": []}
        started = time.monotonic()
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={},
                pass_fds=(program_fd, status_write),
                close_fds=True,
                start_new_session=True,
                **drop,  # type: ignore[call-overload]
            )
        except FileNotFoundError:
            raise SandboxUnavailable(f"{bwrap} not found: {INSTALL_HINT}") from None
        except PermissionError as exc:
            raise SandboxUnavailable(
                f"cannot start {bwrap}: {exc.strerror}: {INSTALL_HINT}"
            ) from None
        os.close(status_write)
        status_write = -1
        os.close(program_fd)
        program_fd = -1
        return _collect(process, status_read, limits, started, cancel)
    finally:
        for fd in (program_fd, status_write, status_read):
            if fd >= 0:
                os.close(fd)


def _collect(
    process: subprocess.Popen[bytes],
    status_fd: int,
    limits: Limits,
    started: float,
    cancel: threading.Event | None,
) -> Outcome:
    assert process.stdout is not None and process.stderr is not None
    out, err = _Capture(limits.output_bytes), _Capture(limits.output_bytes)
    captures = {process.stdout.fileno(): out, process.stderr.fileno(): err}
    status = bytearray()
    deadline = started + limits.wall_s
    timed_out = False
    with selectors.DefaultSelector() as selector:
        for fd in captures:
            selector.register(fd, selectors.EVENT_READ)
        selector.register(status_fd, selectors.EVENT_READ)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if cancel is not None and cancel.is_set() and not timed_out:
                remaining = 0
            if remaining <= 0:
                if timed_out:
                    break  # killed, and still a pipe open: stop waiting on it
                timed_out = True
                _kill(process)
                deadline = time.monotonic() + DRAIN_AFTER_KILL_S
                continue
            wait = remaining if cancel is None else min(remaining, CANCEL_POLL_S)
            for key, _ in selector.select(timeout=wait):
                fd = int(key.fd)
                chunk = os.read(fd, READ_CHUNK)
                if not chunk:
                    selector.unregister(fd)
                elif fd == status_fd:
                    if len(status) < READ_CHUNK:  # a few small JSON documents
                        status += chunk
                else:
                    captures[fd].add(chunk)
    if timed_out:
        _kill(process)
    _, wait_status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(wait_status)
    wall_s = time.monotonic() - started
    process.stdout.close()
    process.stderr.close()
    documents = _status_documents(bytes(status))
    stderr = err
    if not any("child-pid" in document for document in documents) and not timed_out:
        message = stderr.kept.decode("utf-8", errors="replace").strip()[:MAX_SETUP_MESSAGE]
        raise SandboxUnavailable(
            f"the sandbox could not start ({message or f'bwrap exit {process.returncode}'}): "
            f"{INSTALL_HINT}"
        )
    exit_code: int | None = None
    for document in documents:
        value = document.get("exit-code")
        if isinstance(value, int):
            exit_code = value
    return Outcome(
        stdout=out.stream(),
        stderr=stderr.stream(),
        exit=None if timed_out else exit_code,
        timed_out=timed_out,
        wall_s=wall_s,
        # killed at the deadline, bubblewrap never reaped the program: its CPU time is lost
        cpu_s=None if timed_out else usage.ru_utime + usage.ru_stime,
    )


def _kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL bubblewrap's whole session; the sandbox's namespace dies with it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def _status_documents(data: bytes) -> list[dict[str, object]]:
    """bubblewrap's --json-status-fd output: JSON objects one after another."""
    decoder = json.JSONDecoder()
    text = data.decode("utf-8", errors="replace")
    documents: list[dict[str, object]] = []
    index = 0
    while index < len(text):
        while index < len(text) and text[index].isspace():
            index += 1
        if index >= len(text):
            break
        try:
            value, index = decoder.raw_decode(text, index)
        except ValueError:
            break
        if isinstance(value, dict):
            documents.append(value)
    return documents
