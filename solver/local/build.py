"""Build and cache llama.cpp's ``llama-server`` for the embedded local model.

No prebuilt OpenAI-compatible GGUF server on PyPI runs on a generic x86-64 machine (the ones
tried died with SIGILL on CPUs without AVX-VNNI, or needed glibc 2.38; docs/local-model.md),
so the project compiles upstream
``llama-server`` once, from the llama.cpp tree vendored in the ``llama-cpp-python`` sdist
(MIT, fetched with pip from PyPI), and caches the binary in the user's cache directory::

    $XDG_CACHE_HOME/olympiad-solver/llama-server/<llama-cpp-python version>-<cpu digest>/
        llama-server      the binary (static build: links only libc, libstdc++, libgomp)
        build.json        how it was built: source version, cmake arguments, build seconds

The build is native (``GGML_NATIVE``), so the directory name carries a digest of the CPU's
feature flags: a cache copied to another kind of CPU is rebuilt instead of dying on SIGILL.
A new pinned source version likewise lands in a new directory.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from solver.errors import ConfigError, SolverError

# The llama.cpp source comes from this sdist; changing the pin builds a new cache directory.
LLAMA_CPP_PYTHON_VERSION = "0.3.36"
SERVER_BINARY_NAME = "llama-server"
# Set to a llama-server binary to use it instead of the cached build (e.g. a system install).
SERVER_BINARY_ENV = "SOLVER_LLAMA_SERVER"

CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    # Without this the web UI step tries to download prebuilt assets from a model hub.
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    # One self-contained binary: the cache holds a single file.
    "-DBUILD_SHARED_LIBS=OFF",
)

# Tells the user, one line at a time, what a long step is doing.
ProgressLine = Callable[[str], None]


class BuildToolsMissing(SolverError):
    """cmake, a C/C++ compiler or a build tool is not installed."""


class BuildFailed(SolverError):
    """Downloading or compiling llama-server failed."""


@dataclass(frozen=True)
class ServerBuild:
    """A usable llama-server binary and where it came from."""

    binary: Path
    source_version: str
    cache_key: str  # "" for a binary named by SOLVER_LLAMA_SERVER
    built_now: bool = False
    build_seconds: float | None = None


def _silent(_line: str) -> None:
    return None


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/olympiad-solver`` (default ``~/.cache/olympiad-solver``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "olympiad-solver"


def cpu_flags_digest() -> str:
    """A short digest of this CPU's feature flags (architecture + ``/proc/cpuinfo`` flags)."""
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    flags.update(value.split())
                    break
    except OSError:
        pass  # not Linux: the architecture name alone keys the cache
    text = os.uname().machine + " " + " ".join(sorted(flags))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def cache_key(version: str = LLAMA_CPP_PYTHON_VERSION) -> str:
    return f"{version}-{cpu_flags_digest()}"


def build_dir(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    return cache_root() / "llama-server" / cache_key(version)


def _runs(binary: Path) -> bool:
    """Whether the binary starts at all (a truncated copy or a foreign CPU build fails here)."""
    try:
        done = subprocess.run(
            [str(binary), "--version"], capture_output=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def find_server() -> ServerBuild | None:
    """The llama-server to use, or None when it has not been built for this machine yet."""
    override = os.environ.get(SERVER_BINARY_ENV)
    if override:
        path = Path(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ConfigError(f"{SERVER_BINARY_ENV}={override}: not an executable file")
        return ServerBuild(binary=path, source_version="external", cache_key="")
    binary = build_dir() / SERVER_BINARY_NAME
    if binary.is_file() and os.access(binary, os.X_OK):
        return ServerBuild(
            binary=binary, source_version=LLAMA_CPP_PYTHON_VERSION, cache_key=cache_key()
        )
    return None


def ensure_server(progress: ProgressLine = _silent, jobs: int | None = None) -> ServerBuild:
    """Return the cached llama-server, building it first if missing or unusable.

    Concurrent callers (two terminals, parallel CI jobs) serialise on a lock file, so only
    one of them compiles; the others then find the finished binary.
    """
    found = find_server()
    if found is not None and (found.cache_key == "" or _runs(found.binary)):
        return found
    target = build_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    waiting = "another process is building llama-server; waiting for it"
    with exclusive(target.parent / f".{target.name}.lock", lambda: progress(waiting)):
        found = find_server()
        if found is not None and _runs(found.binary):
            return found
        return _build(target, progress, jobs or os.cpu_count() or 2)


@contextmanager
def exclusive(lock_path: Path, on_wait: Callable[[], None] = lambda: None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` (created if missing) for the block;
    ``on_wait`` runs once if another holder makes this one wait."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+b") as lock_file:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            on_wait()
            fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def scripts_dir() -> Path:
    """This Python environment's scripts directory, where ``olympiad-solver[local]`` puts the
    cmake and ninja wheels from PyPI (searched even when the venv is not activated)."""
    return Path(sysconfig.get_path("scripts"))


def _which(names: tuple[str, ...]) -> str | None:
    search = os.pathsep.join([str(scripts_dir()), os.environ.get("PATH", "")])
    return next((p for p in (shutil.which(name, path=search) for name in names) if p), None)


def required_tools() -> dict[str, str]:
    """The build tools found, by role; raises :class:`BuildToolsMissing` naming what is not."""
    found: dict[str, str] = {}
    missing: list[str] = []
    for role, candidates in (
        ("cmake", ("cmake",)),
        ("c compiler", ("cc", "gcc", "clang")),
        ("c++ compiler", ("c++", "g++", "clang++")),
        ("build tool", ("ninja", "make")),
    ):
        path = _which(candidates)
        if path is None:
            missing.append(role)
        else:
            found[role] = path
    if missing:
        raise BuildToolsMissing(
            f"cannot build llama-server: no {', '.join(missing)} found; install the Debian "
            "packages cmake and build-essential (or pip install 'olympiad-solver[local]' for "
            "cmake and ninja; a C/C++ compiler is still needed)"
        )
    return found


def _build(target: Path, progress: ProgressLine, jobs: int) -> ServerBuild:
    tools = required_tools()
    build_tool = tools["build tool"]
    generator = "Ninja" if Path(build_tool).name.startswith("ninja") else "Unix Makefiles"
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="build-", dir=target.parent) as scratch_name:
        scratch = Path(scratch_name)
        source = _fetch_source(scratch, progress)
        build = scratch / "build"
        cmake = tools["cmake"]
        configure = [cmake, "-S", str(source), "-B", str(build), "-G", generator]
        configure += [*CMAKE_OPTIONS, f"-DCMAKE_MAKE_PROGRAM={build_tool}"]
        configure += [f"-DCMAKE_C_COMPILER={tools['c compiler']}"]
        configure += [f"-DCMAKE_CXX_COMPILER={tools['c++ compiler']}"]
        progress(f"configuring llama.cpp ({generator})")
        _run(configure, "cmake configure", progress, echo=False)
        progress(f"compiling llama-server with {jobs} jobs (about 5 minutes on 2 cores)")
        compile_argv = [cmake, "--build", str(build), "--target", SERVER_BINARY_NAME]
        _run([*compile_argv, "-j", str(jobs)], "cmake build", progress, echo=True)
        built = build / "bin" / SERVER_BINARY_NAME
        if not _runs(built):
            raise BuildFailed(f"the freshly built {built.name} does not run (--version failed)")
        seconds = time.monotonic() - started
        target.mkdir(parents=True, exist_ok=True)
        staged = target / f".{SERVER_BINARY_NAME}.partial"
        shutil.copy2(built, staged)
        os.replace(staged, target / SERVER_BINARY_NAME)
        record = {
            "source": f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION} sdist (vendor/llama.cpp)",
            "cmake_options": [*CMAKE_OPTIONS],
            "generator": generator,
            "jobs": jobs,
            "build_seconds": round(seconds, 1),
            "cpu_flags_digest": cpu_flags_digest(),
            "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (target / "build.json").write_text(json.dumps(record, indent=2) + "\n")
    progress(f"llama-server built in {seconds:.0f} s: {target / SERVER_BINARY_NAME}")
    return ServerBuild(
        binary=target / SERVER_BINARY_NAME,
        source_version=LLAMA_CPP_PYTHON_VERSION,
        cache_key=target.name,
        built_now=True,
        build_seconds=seconds,
    )


NO_PIP = "No module named pip"
NO_PIP_FIX = "run `python -m ensurepip` in this environment, then `solver local install` again"


def _fetch_source(scratch: Path, progress: ProgressLine) -> Path:
    """Download the pinned sdist with pip and unpack its vendored llama.cpp tree."""
    progress(f"downloading the llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} sdist (77 MB)")
    download = scratch / "download"
    # `--no-binary <name>`, not `:all:`: the latter would also compile cmake itself from source.
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
    argv += ["--no-binary", "llama-cpp-python", "-d", str(download)]
    try:
        _run([*argv, f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}"], "pip download", progress)
    except BuildFailed as exc:
        if NO_PIP in str(exc):  # a venv made by `uv venv` or with --without-pip
            raise BuildFailed(
                f"{sys.executable} has no pip, which downloads the llama.cpp source: {NO_PIP_FIX}"
            ) from None
        raise
    archives = sorted(download.glob("llama_cpp_python-*.tar.gz"))
    if not archives:
        raise BuildFailed("pip download produced no llama-cpp-python sdist")
    progress("unpacking the llama.cpp source")
    with tarfile.open(archives[0]) as archive:
        archive.extractall(scratch / "src", filter="data")
    sources = list((scratch / "src").glob("*/vendor/llama.cpp/CMakeLists.txt"))
    if not sources:
        raise BuildFailed(f"{archives[0].name} holds no vendor/llama.cpp tree")
    return sources[0].parent


def _run(argv: list[str], what: str, progress: ProgressLine, echo: bool = False) -> None:
    """Run a build step; keep the tail of its output for the error message."""
    tail: list[str] = []
    try:
        process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
        )
    except OSError as exc:
        raise BuildFailed(f"{what}: cannot run {argv[0]}: {exc.strerror}") from None
    assert process.stdout is not None
    last_shown = 0.0
    for line in process.stdout:
        tail = [*tail[-19:], line.rstrip()]
        # Ninja prints one "[n/m] ..." line per object; show one every few seconds.
        if echo and line.startswith("[") and time.monotonic() - last_shown > 5:
            progress("  " + line.split(" ", 1)[0])
            last_shown = time.monotonic()
    if process.wait() != 0:
        detail = " | ".join(line for line in tail[-5:] if line)
        raise BuildFailed(f"{what} failed (exit {process.returncode}): {detail}")
