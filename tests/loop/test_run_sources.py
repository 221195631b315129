"""Where a run's endpoint comes from: a dead server's descriptor, the embedded model on resume."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from solver.config import Settings
from solver.endpoint_file import EndpointDescriptor, write_descriptor
from solver.errors import EndpointUnavailable, InputError, ModelChanged, exit_code_for
from solver.records import ManifestEndpoint
from solver.run import resolve_endpoint, resume_endpoint

GGUF = "ab" * 32


@pytest.fixture(autouse=True)
def descriptor_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "endpoint.json"
    monkeypatch.setenv("SOLVER_ENDPOINT_FILE", str(path))
    return path


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def describe(pid: int, port: int, source: str = "local", gguf: str | None = GGUF) -> None:
    write_descriptor(
        EndpointDescriptor(
            base_url=f"http://127.0.0.1:{port}/v1",
            model="smollm2",
            source=source,
            pid=pid,
            gguf_sha256=gguf,
        )
    )


def local_manifest() -> ManifestEndpoint:
    return ManifestEndpoint(
        url="http://127.0.0.1:41000/v1", api="chat", source="local", gguf_sha256=GGUF
    )


def test_a_dead_local_server_fails_at_once() -> None:
    pid = dead_pid()
    describe(pid, 41000)
    with pytest.raises(EndpointUnavailable) as raised:
        resolve_endpoint(Settings())
    assert str(raised.value) == (
        f"the local server (pid {pid}) is not running: run `solver local up`"
    )
    assert exit_code_for(raised.value) == 3


def test_a_dead_served_model_names_serve_up() -> None:
    describe(dead_pid(), 41000, source="serve:sglang", gguf=None)
    with pytest.raises(EndpointUnavailable, match="run `solver serve up`"):
        resolve_endpoint(Settings())


def test_no_endpoint_names_both_servers() -> None:
    with pytest.raises(InputError) as raised:
        resolve_endpoint(Settings())
    assert "solver local up" in str(raised.value) and "solver serve up" in str(raised.value)


def test_resume_follows_the_local_server_to_its_new_port() -> None:
    describe(os.getpid(), 42000)  # a live pid
    target = resume_endpoint(local_manifest(), None, Settings())
    assert target.endpoint.base_url == "http://127.0.0.1:42000/v1"


def test_resume_refuses_another_gguf() -> None:
    describe(os.getpid(), 42000, gguf="cd" * 32)
    with pytest.raises(ModelChanged, match="GGUF"):
        resume_endpoint(local_manifest(), None, Settings())


def test_resume_of_a_local_run_without_the_local_server() -> None:
    with pytest.raises(EndpointUnavailable, match="solver local up"):
        resume_endpoint(local_manifest(), None, Settings())
    describe(os.getpid(), 42000, source="serve:sglang", gguf=None)
    with pytest.raises(EndpointUnavailable, match="solver local up"):
        resume_endpoint(local_manifest(), None, Settings())


def test_resume_of_a_configured_endpoint_keeps_its_url() -> None:
    manifest = local_manifest().model_copy(update={"source": "configured"})
    now = Settings(endpoint="http://127.0.0.1:41000/v1/", api_key="k")  # type: ignore[arg-type]
    target = resume_endpoint(manifest, None, now)
    assert target.endpoint.base_url == "http://127.0.0.1:41000/v1/"
    assert target.endpoint.api_key == "k" and target.moved is None
