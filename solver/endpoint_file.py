"""The endpoint descriptor: how `solver solve` finds the model server that `solver serve up` or
`solver local up` started.

One JSON file, by default ``$XDG_STATE_HOME/olympiad-solver/endpoint.json`` (XDG_STATE_HOME
defaults to ``~/.local/state``), or the path in ``SOLVER_ENDPOINT_FILE``. It is written
atomically (temporary file, fsync, rename) so a reader never sees half a descriptor.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from solver._util.fs import write_atomic
from solver.errors import ConfigError

ENV_ENDPOINT_FILE = "SOLVER_ENDPOINT_FILE"
DESCRIPTOR_NAME = "endpoint.json"
STATE_DIR_NAME = "olympiad-solver"


class EndpointDescriptor(BaseModel):
    """A running model server, as recorded for other processes to find."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field(description="OpenAI-style base URL ending in /v1")
    api: Literal["chat", "responses", "anthropic"] = "chat"
    model: str
    source: str = Field(description='"serve:<recipe>" or "local"')
    pid: int
    context_length: int | None = None
    started: datetime = Field(default_factory=lambda: datetime.now(UTC))
    gguf_sha256: str | None = None


def state_dir() -> Path:
    """``$XDG_STATE_HOME/olympiad-solver`` (default ``~/.local/state/olympiad-solver``)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / STATE_DIR_NAME


def descriptor_path() -> Path:
    override = os.environ.get(ENV_ENDPOINT_FILE)
    if override:
        return Path(override)
    return state_dir() / DESCRIPTOR_NAME


def write_descriptor(desc: EndpointDescriptor) -> Path:
    """Write the descriptor atomically and return its path."""
    path = descriptor_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = desc.model_dump_json(indent=2, exclude_none=True).encode() + b"\n"
    write_atomic(path, data, mode=0o600)
    return path


def read_descriptor() -> EndpointDescriptor | None:
    """The current descriptor, or None when there is none.

    A file that exists but is not a valid descriptor is a :class:`ConfigError` naming the file,
    rather than silently ignored: a stale or hand-edited file should be noticed.
    """
    path = descriptor_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return EndpointDescriptor.model_validate(json.loads(raw))
    except (ValueError, ValidationError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"{path}: not a valid endpoint descriptor ({first})") from None


def clear_descriptor(pid: int | None = None) -> bool:
    """Remove the descriptor. With ``pid``, only when the descriptor names that process, so a
    stopping server never removes the descriptor of a newer one. Returns whether it removed it."""
    path = descriptor_path()
    if pid is not None:
        try:
            current = read_descriptor()
        except ConfigError:
            return False
        if current is None or current.pid != pid:
            return False
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
