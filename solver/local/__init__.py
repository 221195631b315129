"""The face of solver.local: what other packages import from it."""

from __future__ import annotations

from solver.local import model
from solver.local.build import (
    SERVER_BINARY_ENV,
    BuildToolsMissing,
    build_dir,
    ensure_server,
    find_server,
    required_tools,
)
from solver.local.model import file_sha256, find_gguf
from solver.local.server import (
    DEFAULT_CONTEXT,
    ServerProcess,
    default_threads,
    is_running,
    start_server,
    stop_server,
)

__all__ = [
    "DEFAULT_CONTEXT",
    "SERVER_BINARY_ENV",
    "BuildToolsMissing",
    "ServerProcess",
    "build_dir",
    "default_threads",
    "ensure_server",
    "file_sha256",
    "find_gguf",
    "find_server",
    "is_running",
    "model",
    "required_tools",
    "start_server",
    "stop_server",
]
