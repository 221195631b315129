"""Launch plans: validation gates the start, the API key never reaches printable output."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest

from solver.errors import ConfigError, InputError
from solver.serve.launch import check_installed, installed_version, pick_process, plan_recipe
from solver.serve.recipe import load_recipe, render


def test_api_key_is_passed_but_never_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLM_KEY", "sk-very-secret")
    deployment = render(load_recipe("glm52-fp8-h200"))
    process = pick_process(deployment, None)
    plan = plan_recipe(deployment, process, api_key_env="GLM_KEY", check_version=False)
    assert plan.argv[-2:] == ("--api-key", "sk-very-secret")
    assert "sk-very-secret" not in " ".join(plan.printable_argv())
    assert plan.writes_descriptor and plan.url == "http://127.0.0.1:30000"
    assert plan.env["SGLANG_TIMEOUT_KEEP_ALIVE"] == "900"


def test_empty_key_variable_is_an_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    deployment = render(load_recipe("glm52-fp8-h200"))
    with pytest.raises(InputError, match="NO_SUCH_KEY"):
        plan_recipe(
            deployment, deployment.processes[0], api_key_env="NO_SUCH_KEY", check_version=False
        )


def test_a_recipe_that_fails_validation_never_starts() -> None:
    deployment = render(load_recipe("glm52-fp8-mi355x"), ["tp-size=6"])
    with pytest.raises(ConfigError, match="must be divisible"):
        plan_recipe(deployment, deployment.processes[0])


def test_container_plan_and_process_choice() -> None:
    deployment = render(load_recipe("glm52-fp8-mi355x-pd"))
    router = pick_process(deployment, "router")
    plan = plan_recipe(deployment, router, container=True)
    assert plan.argv[:2] == ("docker", "run") and plan.env == {}
    assert plan.writes_descriptor  # the router is what clients talk to
    prefill = plan_recipe(deployment, pick_process(deployment, "prefill"), check_version=False)
    assert not prefill.writes_descriptor
    with pytest.raises(InputError, match="no process"):
        pick_process(deployment, "nope")


def test_container_mode_removes_and_stops_the_container_by_name() -> None:
    # no docker here: the commands are checked as argv
    deployment = render(load_recipe("glm52-fp8-mi355x"))
    process = deployment.processes[0]
    plan = plan_recipe(deployment, process, container=True)
    names = [a.removeprefix("--name=") for a in plan.argv if a.startswith("--name=")]
    assert len(names) == 1
    name = names[0]
    assert "--init" in plan.argv[: plan.argv.index(f"--name={name}")]
    assert plan.prepare == (("docker", "rm", "--force", name),)
    assert plan.teardown[0][:2] == ("docker", "stop") and plan.teardown[0][-1] == name
    assert ("docker", "rm", "--force", name) in plan.teardown
    native = plan_recipe(deployment, process, check_version=False)
    assert native.prepare == native.teardown == ()


def test_installed_version_reads_metadata_of_the_named_interpreter() -> None:
    import httpx

    assert installed_version(sys.executable, "httpx") == httpx.__version__
    assert installed_version(sys.executable, "no-such-distribution-x") is None
    assert installed_version("/nonexistent/python3", "httpx") is None


def fake_python(tmp_path: Path, prints: str) -> str:
    """An 'interpreter' that answers the metadata query with a fixed version."""
    script = tmp_path / "python3"
    script.write_text(f"#!/bin/sh\necho {prints}\n")
    script.chmod(0o755)
    return str(script)


def test_start_refuses_another_sglang_version(tmp_path: Path) -> None:
    deployment = render(load_recipe("glm52-fp8-h200"))
    process = deployment.processes[0]
    moved = dataclasses.replace(process, argv=(fake_python(tmp_path, "0.5.1"), *process.argv[1:]))
    with pytest.raises(InputError, match=r"has sglang 0\.5\.1 but .* validated for 0\.5\.23"):
        check_installed(deployment, moved)
    same = dataclasses.replace(process, argv=(fake_python(tmp_path, "0.5.23"), *process.argv[1:]))
    check_installed(deployment, same)


@pytest.mark.skipif(importlib.util.find_spec("sglang") is not None, reason="sglang installed")
def test_start_without_sglang_says_how_to_fix() -> None:
    deployment = render(load_recipe("glm52-fp8-h200"))
    process = deployment.processes[0]
    here = dataclasses.replace(process, argv=(sys.executable, *process.argv[1:]))
    with pytest.raises(InputError, match=r"not installed .* sglang==0\.5\.23 .* --container"):
        plan_recipe(deployment, here)


def test_descriptor_is_withdrawn_between_a_crash_and_the_next_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import signal
    import socket
    import threading

    from solver.endpoint_file import read_descriptor
    from solver.serve.launch import plan_command, run_plan
    from solver.serve.supervisor import Policy, Supervisor

    monkeypatch.delenv("SOLVER_ENDPOINT_FILE", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = [sys.executable, "-m", "solver.testing.fake_sglang", "--port", str(port)]
    plan = plan_command(argv, f"http://127.0.0.1:{port}")
    policy = Policy(startup_poll=0.05, liveness_interval=0.1, deep_interval=0)
    policy = dataclasses.replace(policy, backoff_initial=0.05, stop_grace=5)
    seen_at_exit: list[object] = []
    readies = threading.Semaphore(0)
    holder: list[Supervisor] = []

    def echo(line: str) -> None:
        if line.startswith("serve: exited"):
            seen_at_exit.append(read_descriptor())  # what `solver solve` would find now
        if line.startswith("serve: endpoint descriptor /"):
            readies.release()

    thread = threading.Thread(
        target=run_plan,
        args=(plan,),
        kwargs={"source": "test", "policy": policy, "echo": echo, "install_stop": holder.append},
        daemon=True,
    )
    thread.start()
    assert readies.acquire(timeout=60)
    first = read_descriptor()
    assert first is not None and first.pid == holder[0].pid
    os.kill(first.pid, signal.SIGKILL)
    assert readies.acquire(timeout=60)  # restarted and advertised again
    holder[0].stop()
    thread.join(timeout=30)
    assert seen_at_exit == [None]
    assert read_descriptor() is None
