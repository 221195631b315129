"""Configuration: defaults < solver.toml (or --config) < environment < flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from solver.cli.main import main
from solver.config import resolve_settings
from solver.errors import ConfigError

TOML = """
endpoint = "http://127.0.0.1:9001/v1"
model = "from-file"
candidates = 3
[acceptance]
verifications = 4
[roles.verifier]
temperature = 0.6
max_tokens = 64000
[budget]
calls = 50
"""


def test_defaults(tmp_path: Path) -> None:
    resolved = resolve_settings(env={}, cwd=tmp_path)
    s = resolved.settings
    assert s.endpoint is None and s.api == "chat" and s.candidates == 4
    assert s.role("generator").max_tokens == 256_000
    assert s.acceptance.verifications == 5 and s.acceptance.accepted_needed == 2
    assert resolved.sources["candidates"] == "default"
    for name in ("generator", "verifier", "grader"):
        role = s.role(name)
        assert (role.temperature, role.top_p, role.thinking_budget) == (1.0, 0.95, None)
    assert resolved.sources["roles.verifier.top_p"] == "default"


def test_a_thinking_budget_per_role(tmp_path: Path) -> None:
    (tmp_path / "solver.toml").write_text("[roles.generator]\nthinking_budget = 32000\n")
    s = resolve_settings(env={}, cwd=tmp_path).settings
    assert s.role("generator").thinking_budget == 32000
    assert s.role("reviser").thinking_budget is None


def test_file_over_defaults(tmp_path: Path) -> None:
    (tmp_path / "solver.toml").write_text(TOML)
    resolved = resolve_settings(env={}, cwd=tmp_path)
    s = resolved.settings
    assert s.model == "from-file" and s.candidates == 3
    assert s.acceptance.verifications == 4
    assert s.role("verifier").temperature == 0.6 and s.role("verifier").max_tokens == 64000
    assert s.role("generator").max_tokens == 256_000
    assert resolved.sources["candidates"].endswith("solver.toml")


def test_explicit_config_file_instead_of_cwd(tmp_path: Path) -> None:
    (tmp_path / "solver.toml").write_text('model = "cwd"\n')
    other = tmp_path / "other.toml"
    other.write_text('model = "explicit"\n')
    assert resolve_settings(config_file=other, env={}, cwd=tmp_path).settings.model == "explicit"


def test_environment_over_file(tmp_path: Path) -> None:
    (tmp_path / "solver.toml").write_text(TOML)
    env = {
        "SOLVER_MODEL": "from-env",
        "SOLVER_ENDPOINT": "http://127.0.0.1:9002/v1",
        "SOLVER_API_KEY": "sk-secret-123",
    }
    resolved = resolve_settings(env=env, cwd=tmp_path)
    assert resolved.settings.model == "from-env"
    assert resolved.settings.endpoint == "http://127.0.0.1:9002/v1"
    assert resolved.sources["model"] == "env:SOLVER_MODEL"
    assert "sk-secret-123" not in json.dumps(resolved.settings.masked())


def test_flags_over_environment(tmp_path: Path) -> None:
    resolved = resolve_settings(
        env={"SOLVER_MODEL": "from-env"},
        flags={"model": "from-flag", "candidates": 9},
        cwd=tmp_path,
    )
    assert resolved.settings.model == "from-flag" and resolved.settings.candidates == 9
    assert resolved.sources["model"] == "flag"


def test_vendor_variables_apply_to_their_protocol_only(tmp_path: Path) -> None:
    env = {
        "OPENAI_BASE_URL": "http://127.0.0.1:1/v1",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:2",
        "ANTHROPIC_API_KEY": "ak",
    }
    chat = resolve_settings(env=env, cwd=tmp_path).settings
    assert chat.endpoint == "http://127.0.0.1:1/v1" and chat.api_key is None
    anthropic = resolve_settings(env=env, flags={"api": "anthropic"}, cwd=tmp_path).settings
    assert anthropic.endpoint == "http://127.0.0.1:2"
    assert anthropic.api_key is not None and anthropic.api_key.get_secret_value() == "ak"
    mine = resolve_settings(env={**env, "SOLVER_ENDPOINT": "http://127.0.0.1:3/v1"}, cwd=tmp_path)
    assert mine.settings.endpoint == "http://127.0.0.1:3/v1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("colour = 1\n", "unknown key 'colour'"),
        ("[budget]\nminutes = 3\n", "unknown key 'budget.minutes'"),
        ("[roles.prover]\ntemperature = 1\n", "unknown key 'roles.prover.temperature'"),
        ('candidates = "many"\n', "key 'candidates'"),
        ("[acceptance]\nverifications = 0\n", "key 'acceptance.verifications'"),
        ("[roles.generator]\nthinking_budget = 0\n", "key 'roles.generator.thinking_budget'"),
        ("candidates = \n", "invalid TOML"),
    ],
)
def test_bad_config_names_key_and_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "solver.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        resolve_settings(env={}, cwd=tmp_path)
    assert message in str(caught.value)
    assert str(path) in str(caught.value)


def test_bad_environment_value_names_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="env:SOLVER_API"):
        resolve_settings(env={"SOLVER_API": "grpc"}, cwd=tmp_path)


def test_config_show_json_with_sources_and_masked_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "solver.toml").write_text(TOML)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        main, ["config", "show", "--json"], env={"SOLVER_API_KEY": "sk-very-secret"}
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)["settings"]
    assert data["candidates"] == {"value": 3, "source": str(tmp_path / "solver.toml")}
    assert data["api_key"]["value"] == "***" and data["api_key"]["source"] == "env:SOLVER_API_KEY"
    assert "sk-very-secret" not in result.output


def test_config_show_bad_file_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("nonsense = 1\n")
    result = CliRunner().invoke(main, ["config", "show", "--config", str(bad)])
    assert result.exit_code == 2
    assert "unknown key 'nonsense'" in result.output
    assert "Traceback" not in result.output


ROLES = ("generator", "verifier", "reviewer", "reviser", "grader", "selector", "checker")


def test_a_file_setting_one_role_keeps_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "solver.toml").write_text("[roles.generator]\nmax_tokens = 512\n")
    resolved = resolve_settings(env={}, cwd=tmp_path)
    assert sorted(resolved.settings.roles) == sorted(ROLES)
    assert resolved.settings.roles["generator"].max_tokens == 512
    assert resolved.settings.roles["verifier"].max_tokens == 256_000
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["config", "show", "--json"], env={})
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)["settings"]
    for role in ROLES:
        assert f"roles.{role}.temperature" in data
    assert data["roles.verifier.max_tokens"] == {"value": 256_000, "source": "default"}
    assert data["roles.generator.max_tokens"]["source"] == str(tmp_path / "solver.toml")


def test_a_flag_setting_one_role_keeps_the_others(tmp_path: Path) -> None:
    flags = {"roles.grader.max_tokens": 100}
    settings = resolve_settings(env={}, cwd=tmp_path, flags=flags).settings
    assert sorted(settings.roles) == sorted(ROLES)
    assert settings.roles["grader"].max_tokens == 100
    assert settings.roles["selector"].max_tokens == 256_000


@pytest.mark.parametrize("text", ["[budget]\n", "[roles]\n", "[roles.verifier]\n[timeouts]\n"])
def test_empty_tables_are_accepted(tmp_path: Path, text: str) -> None:
    (tmp_path / "solver.toml").write_text(text)
    settings = resolve_settings(env={}, cwd=tmp_path).settings
    assert settings.budget.calls is None and sorted(settings.roles) == sorted(ROLES)


def test_an_empty_unknown_table_is_still_an_error(tmp_path: Path) -> None:
    (tmp_path / "solver.toml").write_text("[budgets]\n")
    with pytest.raises(ConfigError, match="unknown key 'budgets'"):
        resolve_settings(env={}, cwd=tmp_path)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:hunter2@example.com/v1", "https://***@example.com/v1"),
        ("https://tok-abc@example.com:8443/v1", "https://***@example.com:8443/v1"),
        ("https://example.com/v1?api_key=hunter2&v=2", "https://example.com/v1?api_key=***&v=***"),
        ("http://127.0.0.1:30000/v1", "http://127.0.0.1:30000/v1"),
    ],
)
def test_config_show_masks_url_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, shown: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["config", "show", "--json"], env={"SOLVER_ENDPOINT": url})
    assert result.exit_code == 0, result.output
    endpoint = json.loads(result.output)["settings"]["endpoint"]
    assert endpoint == {"value": shown, "source": "env:SOLVER_ENDPOINT"}
    assert "hunter2" not in result.output and "tok-abc" not in result.output
    table = CliRunner().invoke(main, ["config", "show"], env={"SOLVER_ENDPOINT": url})
    assert "hunter2" not in table.output and "tok-abc" not in table.output


def test_config_show_off_a_terminal_keeps_whole_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `solver config show | head`: the runner's stdout is no terminal; nothing may be cut
    monkeypatch.delenv("COLUMNS", raising=False)
    deep = tmp_path / ("a-long-directory-name-" * 4) / "project"
    deep.mkdir(parents=True)
    (deep / "solver.toml").write_text(TOML)
    config_file = deep / "solver.toml"
    result = CliRunner().invoke(main, ["config", "show", "--config", str(config_file)], env={})
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if " candidates " in line]
    assert len(lines) == 1 and str(config_file) in lines[0]
    assert any("roles.verifier.max_tokens" in line for line in result.stdout.splitlines())


def test_a_checker_brings_a_final_round_unless_one_is_set(tmp_path: Path) -> None:
    from solver.run.policy_settings import final_round

    def size(flags: dict[str, object]) -> int:
        return final_round(resolve_settings(env={}, cwd=tmp_path, flags=flags).settings)

    checker = {"roles.checker.endpoint": "http://127.0.0.1:9/v1"}
    assert size({}) == 0
    assert size(checker) == 5
    assert size({**checker, "acceptance.final_verifications": 0}) == 0
    assert size({**checker, "acceptance.final_verifications": 12}) == 12
    assert size({"acceptance.final_verifications": 3}) == 3
