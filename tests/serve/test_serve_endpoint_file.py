from __future__ import annotations

from pathlib import Path

import pytest

from solver.endpoint_file import (
    EndpointDescriptor,
    clear_descriptor,
    descriptor_path,
    read_descriptor,
    write_descriptor,
)
from solver.errors import ConfigError


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOLVER_ENDPOINT_FILE", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def _desc(pid: int = 4242) -> EndpointDescriptor:
    return EndpointDescriptor(
        base_url="http://127.0.0.1:30000/v1",
        model="glm-5.2",
        source="serve:glm52-fp8-mi355x",
        pid=pid,
        context_length=131072,
    )


def test_default_path_under_xdg_state(tmp_path: Path) -> None:
    assert descriptor_path() == tmp_path / "state" / "olympiad-solver" / "endpoint.json"


def test_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "elsewhere" / "ep.json"
    monkeypatch.setenv("SOLVER_ENDPOINT_FILE", str(target))
    assert write_descriptor(_desc()) == target
    assert target.exists()


def test_round_trip_and_absent() -> None:
    assert read_descriptor() is None
    write_descriptor(_desc())
    got = read_descriptor()
    assert got is not None
    assert got.base_url == "http://127.0.0.1:30000/v1"
    assert got.pid == 4242
    assert got.context_length == 131072
    assert got.started.tzinfo is not None


def test_clear_only_own_pid() -> None:
    write_descriptor(_desc(pid=1))
    assert clear_descriptor(pid=2) is False
    assert read_descriptor() is not None
    assert clear_descriptor(pid=1) is True
    assert read_descriptor() is None
    assert clear_descriptor() is False


def test_corrupt_file_is_a_clear_error() -> None:
    path = descriptor_path()
    path.parent.mkdir(parents=True)
    path.write_text('{"base_url": 3}')
    with pytest.raises(ConfigError, match="not a valid endpoint descriptor"):
        read_descriptor()
