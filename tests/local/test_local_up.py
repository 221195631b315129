"""`solver local up` and a server that already runs: reuse it only when it fits the request."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from solver.cli.local import group
from solver.endpoint_file import read_descriptor
from solver.local import model as local


@pytest.fixture
def running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> local.LocalServerRecord:
    """A healthy server started with a 2048-token context (no process behind it)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("SOLVER_ENDPOINT_FILE", raising=False)
    record = local.LocalServerRecord(
        pid=4242,
        port=18080,
        base_url="http://127.0.0.1:18080/v1",
        model="smollm2-135m",
        context_length=2048,
        threads=1,
        binary="/nonexistent/llama-server",
        gguf="/nonexistent/model.gguf",
        gguf_sha256="0" * 64,
        log="/nonexistent/llama-server.log",
        started=datetime.now(UTC),
    )
    monkeypatch.setattr(local, "_running_record", lambda: record)
    monkeypatch.setattr(local, "is_healthy", lambda _url: True)
    return record


def test_up_with_another_context_is_refused(running: local.LocalServerRecord) -> None:
    result = CliRunner().invoke(group, ["up", "--context", "4096"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: the local server already runs with a 2048-token context; "
        "run `solver local down` first to start it with 4096"
    )
    assert read_descriptor() is None  # nothing was pointed at the mismatching server


@pytest.mark.parametrize("args", [[], ["--context", "2048"]])
def test_up_with_the_same_or_no_context_reuses_it(
    running: local.LocalServerRecord, args: list[str]
) -> None:
    result = CliRunner().invoke(group, ["up", *args])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == running.base_url
    descriptor = read_descriptor()
    assert descriptor is not None and descriptor.context_length == 2048


def test_the_requested_context_is_what_a_new_up_is_compared_with(
    running: local.LocalServerRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    # llama.cpp may allocate a little more than asked: asking again for the same is no change.
    padded = running.model_copy(update={"context_length": 1024, "requested_context": 1000})
    monkeypatch.setattr(local, "_running_record", lambda: padded)
    assert CliRunner().invoke(group, ["up", "--context", "1000"]).exit_code == 0
    assert CliRunner().invoke(group, ["up", "--context", "1024"]).exit_code == 2
