"""Start, probe and stop one ``llama-server`` process on the loopback interface.

This module knows processes and HTTP health only; :mod:`solver.local.model` adds the user-facing
state (the endpoint descriptor, ``solver local up|down|status``), and the test fixture uses
:func:`start_server` / :func:`stop_server` directly for a private server.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from solver.errors import EndpointUnavailable

HOST = "127.0.0.1"
MODEL_ALIAS = "smollm2-135m"
# SmolLM2-135M was trained with an 8192-token context; a full six-role prompt fits in it, and
# its KV cache at this size is about 190 MB.
DEFAULT_CONTEXT = 8192


def default_threads() -> int:
    """Half the cores, at most 4. llama.cpp's worker threads spin on barriers, so on a busy
    machine a thread per core collapses: on 2 shared cores under load, 2 threads decoded
    1.7 tok/s where 1 thread decoded 25-36 (docs/local-model.md)."""
    return max(1, min(4, (os.cpu_count() or 2) // 2))


READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0

# Popen handles of servers this process started, so they can be reaped (no zombies, no
# "subprocess still running" warnings) when stopped from the same process.
_children: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class ServerProcess:
    """A running llama-server and how it was started."""

    pid: int
    port: int
    context_length: int
    model: str
    binary: Path
    gguf: Path
    log_path: Path
    host: str = HOST

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (ends in ``/v1``)."""
        return f"{self.root_url}/v1"


def free_port(host: str = HOST) -> int:
    """A TCP port that is free on ``host`` right now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def server_argv(
    binary: Path,
    gguf: Path,
    port: int,
    context_length: int,
    threads: int,
    host: str = HOST,
    extra_args: Sequence[str] = (),
) -> list[str]:
    return [
        str(binary),
        "--model",
        str(gguf),
        "--alias",
        MODEL_ALIAS,
        "--host",
        host,
        "--port",
        str(port),
        "--ctx-size",
        str(context_length),
        "--threads",
        str(threads),
        # Idle workers sleep instead of busy-polling: the cores are shared with the solver.
        "--poll",
        "0",
        # One slot: requests never share a batch, so temperature-0 output is reproducible.
        "--parallel",
        "1",
        "--no-webui",  # an API server only
        # Weight repacking routes matrix products through the AMX kernels on CPUs that report
        # AMX, and those crash (SIGSEGV in ggml_backend_amx_mul_mat) where the hypervisor does
        # not grant the tile state; the plain kernels are fast enough for a 135M model.
        "--no-repack",
        *extra_args,
    ]


def start_server(
    binary: Path,
    gguf: Path,
    log_path: Path,
    *,
    port: int | None = None,
    context_length: int = DEFAULT_CONTEXT,
    threads: int | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
    extra_args: Sequence[str] = (),
    die_with_parent: bool = False,
) -> ServerProcess:
    """Start llama-server detached (own session, output to ``log_path``) and wait until
    ``/health`` answers ok. With ``port=None`` a free port is picked, and picked again if
    another process takes it between the probe and the server's bind.

    ``die_with_parent`` (Linux) has the kernel stop the server when the calling thread's
    process dies, however it dies: a killed test run leaves no server behind. `solver local
    up` leaves it off, since its server must outlive the command."""
    attempts = 1 if port is not None else 3
    last_error: EndpointUnavailable | None = None
    for _ in range(attempts):
        chosen = port if port is not None else free_port()
        try:
            argv = server_argv(
                binary, gguf, chosen, context_length, threads or default_threads(), HOST, extra_args
            )
            server = ServerProcess(
                pid=0,
                port=chosen,
                context_length=context_length,
                model=MODEL_ALIAS,
                binary=binary,
                gguf=gguf,
                log_path=log_path,
            )
            return _start_once(argv, server, ready_timeout_s, die_with_parent)
        except _ExitedEarly as exc:
            last_error = EndpointUnavailable(str(exc))
    assert last_error is not None
    raise last_error


class _ExitedEarly(Exception):
    pass


def _start_once(
    argv: list[str], planned: ServerProcess, ready_timeout_s: float, die_with_parent: bool
) -> ServerProcess:
    log_path = planned.log_path
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        log.write(
            f"\n--- {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} start: "
            f"{' '.join(argv)}\n".encode()
        )
        log.flush()
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # survives the CLI; stopped as a process group
                close_fds=True,
                preexec_fn=_terminate_with_parent if die_with_parent else None,
            )
        except OSError as exc:
            raise EndpointUnavailable(f"cannot start {planned.binary}: {exc.strerror}") from None
    _children[process.pid] = process
    server = replace(planned, pid=process.pid)
    deadline = time.monotonic() + ready_timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            _children.pop(process.pid, None)
            raise _ExitedEarly(
                f"llama-server exited with code {process.returncode} before it was ready: "
                f"{last_log_line(log_path)} (log: {log_path})"
            )
        if is_healthy(server.root_url):
            return server
        time.sleep(0.1)
    stop_server(process.pid)  # our own child: no need to check what it runs
    raise EndpointUnavailable(
        f"llama-server was not ready after {ready_timeout_s:.0f} s (log: {log_path})"
    )


def _terminate_with_parent() -> None:
    """In the child before exec: ask for SIGTERM when the parent dies (prctl
    PR_SET_PDEATHSIG). Without Linux's prctl the server simply outlives its parent."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # 1 == PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def last_log_line(log_path: Path) -> str:
    try:
        lines = log_path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return lines[-1].strip() if lines else "(empty log)"


def is_healthy(root_url: str, timeout_s: float = 2.0) -> bool:
    try:
        response = httpx.get(f"{root_url}/health", timeout=timeout_s)
    except httpx.HTTPError:
        return False
    return response.status_code == 200


def server_props(root_url: str, timeout_s: float = 5.0) -> dict[str, Any]:
    """llama-server's ``/props`` (context size, chat template, build info)."""
    response = httpx.get(f"{root_url}/props", timeout=timeout_s)
    response.raise_for_status()
    props: dict[str, Any] = response.json()
    return props


def is_running(pid: int, binary: Path | None = None) -> bool:
    """Whether ``pid`` is a live (not zombie) process, and, when ``binary`` is given, that
    process runs that binary: a recycled pid of an unrelated program does not count."""
    _reap(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # another user's process: not ours to manage
    proc = Path(f"/proc/{pid}")
    if not proc.exists():
        return True  # no procfs: trust the signal probe
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        if state in ("Z", "X"):
            return False
        if binary is not None:
            # argv[0], or argv[1] when the binary is a script run by its interpreter
            argv = (proc / "cmdline").read_bytes().split(b"\0")[:2]
            return binary.name in {Path(arg.decode(errors="replace")).name for arg in argv}
    except (OSError, IndexError):
        return False
    return True


def stop_server(pid: int, binary: Path | None = None, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """Stop the server's process group: SIGTERM, then SIGKILL after ``timeout_s``.
    Returns False when there was no such running server."""
    if not is_running(pid, binary):
        _children.pop(pid, None)
        return False
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)  # the server leads its own session, so pgid == pid
        except ProcessLookupError:
            break
        except PermissionError:
            os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not is_running(pid):
                _children.pop(pid, None)
                return True
            time.sleep(0.05)
    _children.pop(pid, None)
    return True


def _reap(pid: int) -> None:
    child = _children.get(pid)
    if child is not None:
        child.poll()
        return
    # Not our child: its parent (or init) reaps it.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
