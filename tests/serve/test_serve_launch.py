"""Launch plans: validation gates the start, the API key never reaches printable output."""

from __future__ import annotations

import pytest

from serve.launch import pick_process, plan_recipe
from serve.recipe import load_recipe, render
from solver.errors import ConfigError, InputError


def test_api_key_is_passed_but_never_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLM_KEY", "sk-very-secret")
    deployment = render(load_recipe("glm52-fp8-h200"))
    plan = plan_recipe(deployment, pick_process(deployment, None), api_key_env="GLM_KEY")
    assert plan.argv[-2:] == ("--api-key", "sk-very-secret")
    assert "sk-very-secret" not in " ".join(plan.printable_argv())
    assert plan.writes_descriptor and plan.url == "http://127.0.0.1:30000"
    assert plan.env["SGLANG_TIMEOUT_KEEP_ALIVE"] == "900"


def test_empty_key_variable_is_an_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    deployment = render(load_recipe("glm52-fp8-h200"))
    with pytest.raises(InputError, match="NO_SUCH_KEY"):
        plan_recipe(deployment, deployment.processes[0], api_key_env="NO_SUCH_KEY")


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
    prefill = plan_recipe(deployment, pick_process(deployment, "prefill"))
    assert not prefill.writes_descriptor
    with pytest.raises(InputError, match="no process"):
        pick_process(deployment, "nope")
