"""The `solver serve` verbs through click: output, exit codes, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from solver.cli.serve import group
from solver.testing import FakeEndpoint
from tests.serve import canary_brain as brain


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(group, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_recipes_lists_every_recipe() -> None:
    code, out, _ = invoke("recipes", "--json")
    assert code == 0
    names = {row["name"] for row in json.loads(out)}
    assert {"glm52-fp8-mi355x", "glm52-fp8-mi355x-pd", "glm53-flash-mxfp4-mi355x"} <= names


def test_command_prints_argv_env_and_container() -> None:
    code, out, _ = invoke("command", "glm53-flash-mxfp4-mi355x")
    assert code == 0
    assert "python3 -m sglang.launch_server" in out
    assert "--speculative-num-draft-tokens 6" in out
    assert "SGLANG_USE_AITER=1" in out
    assert "docker run" in out and "--device=/dev/kfd" in out


def test_command_prints_the_pinned_pip_requirements(monkeypatch: pytest.MonkeyPatch) -> None:
    # the README installs what --pip prints; `serve up` must then accept the installed version
    from solver.serve import launch
    from solver.serve.recipe import load_recipe, render

    code, out, _ = invoke("command", "glm52-fp8-mi355x", "--pip")
    assert code == 0
    (requirement,) = out.split()
    name, _, version = requirement.partition("==")
    assert name == "sglang[all]"
    monkeypatch.setattr(launch, "installed_version", lambda python, dist: version)
    deployment = render(load_recipe("glm52-fp8-mi355x"), [])
    launch.check_installed(deployment, deployment.entry)  # raises on a mismatch
    code, out, _ = invoke("command", "glm52-fp8-mi355x-pd", "--pip")
    assert code == 0 and "smg==1.13.0" in out.split()


def test_command_with_a_breaking_override_fails_with_the_rule() -> None:
    code, _, err = invoke(
        "command", "glm52-fp8-mi355x", "--set", "enable-dsa-cache-layer-split=true"
    )
    assert code == 2
    assert "PD prefill" in err and "Traceback" not in err


def test_a_value_given_to_a_switch_names_the_switch() -> None:
    code, _, err = invoke("command", "glm52-fp8-h200", "--set", "enable-metrics=5")
    assert code == 2
    assert "--enable-metrics: is a switch and takes no value, got '5'" in err


def test_command_unknown_recipe_and_bad_set() -> None:
    code, _, err = invoke("command", "nope")
    assert code == 6 and err.startswith("error: no recipe 'nope'")
    code, _, err = invoke("command", "glm52-fp8-mi355x", "--set", "novalue")
    assert code == 2 and "key=value" in err


def test_up_requires_a_process_for_multi_process_recipes() -> None:
    code, _, err = invoke("up", "glm52-fp8-mi355x-pd")
    assert code == 2 and "--process" in err


def test_check_exit_codes_and_baseline(tmp_path: Path) -> None:
    baseline = tmp_path / "b.json"
    fast = ["--repeats", "2", "--batch-sizes", "2", "--chain-steps", "300"]
    with FakeEndpoint(brain.healthy, context_length=16384) as fake:
        code, out, _ = invoke(
            "check", "--endpoint", fake.url, *fast, "--save-baseline", str(baseline)
        )
    assert code == 0, out
    assert "PASSED" in out
    assert json.loads(baseline.read_text())["passed"] is True
    with FakeEndpoint(brain.corrupt_long_outputs(brain.healthy), context_length=16384) as fake:
        code, out, _ = invoke(
            "check", "--endpoint", fake.url, *fast, "--baseline", str(baseline), "--json"
        )
    assert code == 1
    report = json.loads(out)
    assert report["passed"] is False
    assert any("arithmetic-chain" in r for r in report["regressions"])


def test_check_bad_batch_sizes() -> None:
    code, _, err = invoke("check", "--endpoint", "http://127.0.0.1:9", "--batch-sizes", "a,b")
    assert code == 2 and "--batch-sizes" in err


def test_validate_takes_the_model_from_model_path() -> None:
    code, out, err = invoke(
        "validate", "--version", "0.5.23", "--",
        "--model-path", "zai-org/GLM-5.2-FP8", "--tp-size", "8",
    )  # fmt: skip
    assert code == 2
    assert "glm47" in out + err


def test_validate_any_command_line() -> None:
    code, out, err = invoke(
        "validate", "--version", "0.5.23", "--model", "zai-org/GLM-5.2-FP8", "--",
        "python3", "-m", "sglang.launch_server", "--tp", "8", "--enable-dsa-cache-layer-split",
        "--tool-call-parser", "glm47", "--reasoning-parser", "glm45",
    )  # fmt: skip
    assert code == 2
    assert "PD prefill" in out and "abbreviation of --tp-size" in out
    assert "1 error(s) against sglang 0.5.23" in err
    code, out, _ = invoke("validate", "--router", "--", "--worker-urls", "http://127.0.0.1:30000")
    assert code == 0 and "ok: smg 1.13.0" in out
    code, out, _ = invoke(
        "validate", "--router", "--router-tool", "sglang-router", "--",
        "python3", "-m", "sglang_router.launch_router", "--worker-urls", "http://127.0.0.1:30000",
    )  # fmt: skip
    assert code == 0 and "ok: sglang-router 0.3.2" in out


def _record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, url: str) -> None:
    from solver.endpoint_file import EndpointDescriptor, write_descriptor

    monkeypatch.setenv("SOLVER_ENDPOINT_FILE", str(tmp_path / "endpoint.json"))
    write_descriptor(EndpointDescriptor(base_url=url, model="m", source=source, pid=1))


@pytest.mark.parametrize("verb", ["check", "bench"])
def test_the_embedded_local_model_is_never_the_default_endpoint(
    verb: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # nothing listens on port 9: a refusal must come before any request is made
    _record(tmp_path, monkeypatch, "local", "http://127.0.0.1:9/v1")
    code, out, err = invoke(verb)
    assert code == 2 and out == ""
    assert err.strip() == (
        "error: the running endpoint is the embedded local model; pass --endpoint URL"
    )


def test_check_defaults_to_the_serve_up_endpoint_and_announces_each_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = ["--repeats", "2", "--batch-sizes", "2", "--chain-steps", "300"]
    with FakeEndpoint(brain.healthy, context_length=16384) as fake:
        _record(tmp_path, monkeypatch, "serve:glm52-fp8-mi355x", fake.url)
        code, out, err = invoke("check", *fast)
    assert code == 0, out + err
    assert "check: arithmetic-chain: started (max_tokens 32768)" in err
    started = [line for line in err.splitlines() if ": started" in line]
    assert len(started) == len({line.split(":")[1] for line in started})


@pytest.mark.parametrize("mode", [[], ["--pip"], ["--json"]])
def test_a_command_that_fails_validation_prints_nothing_to_stdout(mode: list[str]) -> None:
    # `--pip | xargs pip install` or a pasted argv must not go ahead with an invalid recipe
    code, out, err = invoke("command", "glm52-fp8-mi355x", "--set", "tp-szie=4", *mode)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert sum("--tp-szie" in line for line in lines) == 1  # the finding, said once
    assert lines[-1] == "error: recipe glm52-fp8-mi355x: 1 validation error(s)"


def test_command_prints_the_block_fp8_image_floor_and_the_release_floor() -> None:
    code, out, _ = invoke("command", "glm52-fp8-mi355x")
    assert code == 0
    assert "# gfx950 Block-FP8 image floor: SGLang >= 0.5.15" in out
    assert "# needs SGLang >= 0.5.14 for --enable-prefill-cp (0.5.14), --cp-strategy" in out
    code, out, _ = invoke("command", "glm53-flash-mxfp4-mi355x", "--json")
    payload = json.loads(out)
    assert payload["min_sglang_version"] == "0.5.20"


def test_command_json_names_the_gfx950_floor_only_for_gfx950() -> None:
    _, out, _ = invoke("command", "glm52-fp8-mi355x", "--json")
    assert "0.5.15" in json.loads(out)["gfx950_image_floor"]
    _, out, _ = invoke("command", "glm52-fp8-h200", "--json")
    assert json.loads(out)["gfx950_image_floor"] is None
