"""``solver local up|status|down`` against the real build, in an isolated state directory."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from solver.cli.local import group
from solver.config import Settings
from solver.endpoint_file import EndpointDescriptor, read_descriptor, write_descriptor
from solver.llm import ModelClient
from solver.local import default_threads, is_running
from solver.local import model as local
from solver.run import resolve_endpoint
from tests.local_server import LocalModel

pytestmark = pytest.mark.local_model


@pytest.fixture
def state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_model: LocalModel
) -> Iterator[Path]:
    """A private state dir (descriptor + server record); stops whatever a test left running.

    Depends on ``local_model`` so that a missing build skips (or, in CI, fails) these tests.
    """
    monkeypatch.delenv("SOLVER_ENDPOINT_FILE", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    yield tmp_path / "state"
    local.down()


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(group, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_up_writes_a_local_descriptor_with_the_gguf_digest(state: Path) -> None:
    code, out, _ = _invoke("up", "--context", "2048")
    assert code == 0
    descriptor = read_descriptor()
    assert descriptor is not None
    assert out.strip() == descriptor.base_url
    assert descriptor.source == "local"
    assert descriptor.model == "smollm2-135m"
    assert descriptor.context_length == 2048
    assert descriptor.base_url.startswith("http://127.0.0.1:")
    gguf = local.find_gguf()
    assert gguf is not None
    assert descriptor.gguf_sha256 == local.file_sha256(gguf)
    models = httpx.get(f"{descriptor.base_url}/models", timeout=10).json()
    assert models["data"][0]["id"] == descriptor.model


def test_status_reports_the_running_server_then_exit_3_after_down(state: Path) -> None:
    assert _invoke("up", "--context", "2048")[0] == 0
    code, out, _ = _invoke("status", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["running"] and report["healthy"] and report["descriptor_is_local"]
    assert report["server"]["threads"] == default_threads()
    pid = report["server"]["pid"]

    code, _, _ = _invoke("down")
    assert code == 0
    assert not is_running(pid)
    assert read_descriptor() is None
    code, out, _ = _invoke("status")
    assert code == 3
    assert "running: no" in out


def test_up_twice_reuses_the_running_server(state: Path) -> None:
    _invoke("up", "--context", "2048")
    first = read_descriptor()
    code, _, err = _invoke("up", "--context", "2048")
    second = read_descriptor()
    assert code == 0 and "already running" in err
    assert first is not None and second is not None
    assert second.pid == first.pid


def test_down_keeps_a_descriptor_written_by_another_server(state: Path) -> None:
    _invoke("up", "--context", "2048")
    ours = read_descriptor()
    assert ours is not None
    other = EndpointDescriptor(
        base_url="http://127.0.0.1:1/v1", model="glm", source="serve:test", pid=os.getpid()
    )
    write_descriptor(other)
    assert _invoke("down")[0] == 0
    assert not is_running(ours.pid)
    assert read_descriptor() == other


def test_down_without_a_server_is_a_no_op(state: Path) -> None:
    code, _, err = _invoke("down")
    assert code == 0
    assert "no local server" in err


def test_up_after_the_server_was_killed_starts_a_new_one(state: Path) -> None:
    _invoke("up", "--context", "2048")
    first = read_descriptor()
    assert first is not None
    os.killpg(first.pid, 9)
    code, _, _ = _invoke("up", "--context", "2048")
    second = read_descriptor()
    assert code == 0 and second is not None
    assert second.pid != first.pid
    assert httpx.get(second.base_url.removesuffix("/v1") + "/health", timeout=10).is_success


def test_solver_resolves_the_local_descriptor_and_the_client_sees_its_context(
    state: Path,
) -> None:
    """What `solver solve` does with no endpoint configured: the descriptor `up` wrote names
    the embedded model and its GGUF digest, and the transport reads the server's context."""
    assert _invoke("up", "--context", "2048")[0] == 0
    endpoint, info = resolve_endpoint(Settings())
    gguf = local.find_gguf()
    assert gguf is not None
    assert info.model_dump(include={"source", "gguf_sha256"}) == {
        "source": "local",
        "gguf_sha256": local.file_sha256(gguf),
    }

    async def probe() -> tuple[tuple[str, ...], int | None]:
        async with ModelClient(endpoint) as client:
            served = await client.probe()
            return served.models, served.context_length

    models, context = asyncio.run(probe())
    assert models == ("smollm2-135m",)
    assert context == 2048


def test_two_ups_at_once_start_one_server(state: Path) -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda _: local.up(context_length=2048), range(2)))
    assert results[0].pid == results[1].pid
    assert results[0].base_url == results[1].base_url
