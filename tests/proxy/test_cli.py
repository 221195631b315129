"""`solver proxy use|stats`, `solver config claude|codex`: files, backups, diffs, exit codes."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import click
import httpx
import pytest
from click.testing import CliRunner

from solver.cli.proxy import config_agents, group
from solver.errors import NotFound, ProxyConfigError, UnknownProvider, exit_code_for
from solver.proxy import ProxyServer, load_config
from solver.testing import FakeEndpoint
from solver.testing.fake_endpoint import Reply
from tests.proxy.helpers import ask


@click.group()
def cli() -> None:
    pass


cli.add_command(group)
cli.add_command(config_agents, "config")


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def _config(tmp_path: Path, a: str, b: str) -> Path:
    path = tmp_path / "proxy.toml"
    path.write_text(
        f"""
[server]
port = 0
telemetry = "t.sqlite"
[deadlines]
idle = 30
[[providers]]
name = "a"
base_url = "{a}/v1"
api = "chat"
[[providers]]
name = "b"
base_url = "{b}"
api = "anthropic"
[providers.price]
output = 1.5
"""
    )
    return path


def test_use_switches_live_and_persists(tmp_path: Path) -> None:
    with (
        FakeEndpoint(lambda _: Reply(text="from a")) as a,
        FakeEndpoint(lambda _: Reply(text="from b")) as b,
    ):
        path = _config(tmp_path, a.url, b.url)
        with ProxyServer(load_config(path)) as proxy:
            assert ask("chat", proxy, stream=True, tools=False).text == "from a"
            code, out = _run("proxy", "--config", str(path), "use", "b", "--url", proxy.url)
            assert code == 0, out
            assert ask("chat", proxy, stream=True, tools=False).text == "from b"
            assert httpx.get(proxy.url + "/health").json()["active_provider"] == "b"
        assert load_config(path).active == "b"
        code, out = _run("proxy", "--config", str(path), "use", "nope", "--url", proxy.url)
        assert code == 6 and "no provider named" in out
        code, out = _run("proxy", "--config", str(path), "stats")
        assert code == 0 and "\na " in out and "\nb " in out


def test_bare_use_asks_the_running_proxy_which_saves_the_choice(tmp_path: Path) -> None:
    with (
        FakeEndpoint(lambda _: Reply(text="from a")) as a,
        FakeEndpoint(lambda _: Reply(text="from b")) as b,
    ):
        path = _config(tmp_path, a.url, b.url)
        with ProxyServer(load_config(path)) as proxy:
            port = proxy.url.rsplit(":", 1)[1]
            code, out = _run("proxy", "--port", port, "use", "b")
            assert code == 0, out
            assert ask("chat", proxy, stream=True, tools=False).text == "from b"
            code, out = _run("proxy", "use", "nope", "--url", proxy.url)
            assert code == 6 and "no provider named" in out
        assert load_config(path).active == "b"  # saved by the server, next to its config
        code, out = _run("proxy", "use", "a", "--url", proxy.url)
        assert code == 3 and "no proxy answers" in out and "Traceback" not in out


def test_stats_and_bad_input_exit_codes(tmp_path: Path) -> None:
    code, out = _run("proxy", "stats", "--db", str(tmp_path / "none.sqlite"))
    assert code == 6 and "no telemetry database" in out
    bad = tmp_path / "bad.toml"
    bad.write_text("[[providers]]\nname = 1\n")
    code, out = _run("proxy", "--config", str(bad))
    assert code == 2 and "name must be a str" in out and "Traceback" not in out
    code, out = _run("proxy", "--upstream", "ftp://x")
    assert code == 2
    code, out = _run("proxy", "--upstream", "http://127.0.0.1:9/v1", "--host", "0.0.0.0")
    assert code == 2 and "needs a token" in out
    code, out = _run("proxy")
    assert code == 2


def test_config_claude_backup_dry_run_restore(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    original = '{"theme": "dark", "env": {"KEEP": "1"}}\n'
    settings.write_text(original)
    os.chmod(settings, 0o600)
    code, out = _run("config", "claude", "--settings", str(settings), "--dry-run",
                     "--proxy", "http://127.0.0.1:9999")  # fmt: skip
    assert code == 0 and '+    "ANTHROPIC_BASE_URL": "http://127.0.0.1:9999"' in out
    assert settings.read_text() == original
    for _ in range(2):  # twice: the backup must still be the original
        code, out = _run("config", "claude", "--settings", str(settings), "--proxy",
                         "http://127.0.0.1:9999")  # fmt: skip
        assert code == 0, out
    written = json.loads(settings.read_text())
    assert written["theme"] == "dark" and written["env"]["KEEP"] == "1"
    assert written["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9999"
    assert int(written["env"]["CLAUDE_STREAM_IDLE_TIMEOUT_MS"]) >= 300_000
    assert written["env"]["CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK"] == "1"
    assert settings.stat().st_mode & 0o777 == 0o600
    code, out = _run("config", "claude", "--settings", str(settings), "--restore")
    assert code == 0 and settings.read_text() == original
    code, out = _run("config", "claude", "--settings", str(settings), "--restore")
    assert code == 2 and "no backup" in out
    settings.write_text("{not json")
    code, out = _run("config", "claude", "--settings", str(settings))
    assert code == 2 and "not valid JSON" in out


def test_config_codex_keeps_the_rest_and_restores(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    original = (
        '# my codex config\nmodel = "gpt-5"\nmodel_provider = "openai"\n\n'
        '[model_providers.other]\nname = "other"\nbase_url = "http://x"\n\n'
        '[profiles.fast]\nmodel = "o4"\n'
    )
    path.write_text(original)
    for _ in range(2):
        code, out = _run("config", "codex", "--codex-config", str(path), "--model", "glm-4.6",
                         "--token-env", "SOLVER_PROXY_TOKEN")  # fmt: skip
        assert code == 0, out
    text = path.read_text()
    parsed = tomllib.loads(text)
    assert text.startswith("# my codex config")
    assert parsed["model_provider"] == "olympiad-proxy" and parsed["model"] == "glm-4.6"
    provider = parsed["model_providers"]["olympiad-proxy"]
    assert provider["wire_api"] == "responses" and provider["env_key"] == "SOLVER_PROXY_TOKEN"
    assert provider["base_url"] == "http://127.0.0.1:8788/v1"
    assert parsed["model_providers"]["other"]["name"] == "other"
    assert parsed["profiles"]["fast"]["model"] == "o4"
    assert text.count("[model_providers.olympiad-proxy]") == 1
    code, out = _run("config", "codex", "--codex-config", str(path), "--restore")
    assert code == 0 and path.read_text() == original
    fresh = tmp_path / "new" / "config.toml"
    code, out = _run("config", "codex", "--codex-config", str(fresh))
    assert code == 0 and tomllib.loads(fresh.read_text())["model_provider"] == "olympiad-proxy"
    code, out = _run("config", "codex", "--codex-config", str(fresh), "--restore")
    assert code == 0 and not fresh.exists()


@pytest.mark.parametrize(
    "declared",
    [
        'model_providers = { olympiad-proxy = { name = "old", base_url = "http://x" } }\n',
        'model_providers.olympiad-proxy.base_url = "http://x"\n',
        '[model_providers]\nolympiad-proxy = { name = "old", base_url = "http://x" }\n',
        '[model_providers]\nolympiad-proxy.base_url = "http://x"\n',
    ],
    ids=["inline-top", "dotted-top", "inline-in-table", "dotted-in-table"],
)
def test_config_codex_refuses_our_provider_in_a_form_it_cannot_edit(
    tmp_path: Path, declared: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f'model = "gpt-5"\n{declared}')
    code, out = _run("config", "codex", "--codex-config", str(path))
    assert code == 2 and "inline table or with dotted keys" in out and str(path) in out, out
    assert "Traceback" not in out and path.read_text() == f'model = "gpt-5"\n{declared}'


def test_config_codex_replaces_a_quoted_table_header(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[ model_providers."olympiad-proxy" ]\nname = "old"\nbase_url = "http://x"\n')
    code, out = _run("config", "codex", "--codex-config", str(path))
    assert code == 0, out
    provider = tomllib.loads(path.read_text())["model_providers"]["olympiad-proxy"]
    assert provider["wire_api"] == "responses" and provider["name"] != "old"


def test_quick_start_serves_until_terminated(tmp_path: Path) -> None:
    """`solver proxy --upstream URL` in its own process: discovers the served model, answers,
    writes telemetry in the working directory, stops cleanly on SIGTERM."""
    import signal
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    root = Path(__file__).resolve().parents[2]
    code = "import sys; from solver.cli.proxy import group; group(sys.argv[1:])"
    with FakeEndpoint(lambda _: Reply(text="quick"), served_model="glm-served") as fake:
        process = subprocess.Popen(
            [sys.executable, "-c", code, "--upstream", fake.url + "/v1", "--port", str(port)],
            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(root)},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert process.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
            body = {"model": "anything", "messages": [{"role": "user", "content": "hi"}]}
            answer = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body)
            assert answer.json()["choices"][0]["message"]["content"] == "quick"
            assert fake.requests[-1].model == "glm-served"
        finally:
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=30)
    # uvicorn shuts down gracefully and then re-raises SIGTERM: the conventional -15
    assert process.returncode in (0, -signal.SIGTERM), err.decode()
    assert b"Traceback" not in err
    import sqlite3

    db = sqlite3.connect(tmp_path / "proxy-telemetry.sqlite")
    assert db.execute("SELECT status, upstream_model FROM requests").fetchall() == [
        ("success", "glm-served")
    ]  # flushed on shutdown
    db.close()


@pytest.mark.parametrize(
    ("table", "line", "expected"),
    [
        ("deadlines", "keepalive = 0", "deadlines.keepalive must be a finite number > 0"),
        ("deadlines", "connect = -1", "deadlines.connect must be a finite number > 0"),
        ("deadlines", "open_after = -0.5", "deadlines.open_after must be a finite number >= 0"),
        ("deadlines", "first_byte_per_1k_tokens = -1", "first_byte_per_1k_tokens must be"),
        ("deadlines", "max_wall = inf", "deadlines.max_wall must be a finite number"),
        ("deadlines", "keepalve = 15", "[deadlines]: unknown key 'keepalve'"),
        ("server", "prot = 8788", "[server]: unknown key 'prot'"),
        ("server", "store_bodies = true\nport = 70000", "server.port must be 0-65535"),
    ],
)
def test_bad_deadlines_and_unknown_keys_are_refused(
    tmp_path: Path, table: str, line: str, expected: str
) -> None:
    path = _config(tmp_path, "http://127.0.0.1:9", "http://127.0.0.1:9")
    text = (
        path.read_text().replace("port = 0\n", "").replace(f"[{table}]\n", f"[{table}]\n{line}\n")
    )
    path.write_text(text)
    # `stats` reads the config file and stops there (the bare command would serve)
    code, out = _run("proxy", "--config", str(path), "stats")
    assert code == 2 and expected in out and str(path) in out, out
    assert "Traceback" not in out


def test_zero_is_allowed_where_it_means_none(tmp_path: Path) -> None:
    path = _config(tmp_path, "http://127.0.0.1:9", "http://127.0.0.1:9")
    zeros = "[deadlines]\nopen_after = 0\nfirst_byte_per_1k_tokens = 0\n"
    path.write_text(path.read_text().replace("[deadlines]\n", zeros))
    deadlines = load_config(path).deadlines
    assert (deadlines.open_after, deadlines.first_byte_per_1k_tokens) == (0, 0)


def test_config_claude_writes_a_credential_claude_code_accepts(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    code, out = _run("config", "claude", "--settings", str(settings))
    assert code == 0, out
    env = json.loads(settings.read_text())["env"]
    assert env["ANTHROPIC_AUTH_TOKEN"]  # without one Claude Code stops at "Not logged in"
    code, out = _run("config", "claude", "--settings", str(settings), "--restore")
    code, out = _run("config", "claude", "--settings", str(settings), "--token-env",
                     "SOLVER_PROXY_TOKEN")  # fmt: skip
    assert code == 0, out
    written = json.loads(settings.read_text())
    assert written["apiKeyHelper"] == "printenv SOLVER_PROXY_TOKEN"
    assert "ANTHROPIC_AUTH_TOKEN" not in written["env"]
    code, out = _run("config", "claude", "--settings", str(tmp_path / "x.json"), "--token-env",
                     "A; rm -rf /")  # fmt: skip
    assert code == 2 and "not a variable name" in out


def test_restore_dry_run_changes_nothing_and_edits_need_force(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    original = '{"theme": "dark"}\n'
    settings.write_text(original)
    assert _run("config", "claude", "--settings", str(settings))[0] == 0
    configured = settings.read_text()
    code, out = _run("config", "claude", "--settings", str(settings), "--restore", "--dry-run")
    assert code == 0 and '+{"theme": "dark"}' in out
    assert settings.read_text() == configured
    assert (tmp_path / "settings.json.olympiad-proxy.bak").read_text() == original
    edited = configured.replace('"theme": "dark"', '"theme": "light"')
    settings.write_text(edited)
    code, out = _run("config", "claude", "--settings", str(settings), "--restore")
    assert code == 2 and "--force" in out and '+  "theme": "light"' in out
    assert settings.read_text() == edited
    code, out = _run("config", "claude", "--settings", str(settings), "--restore", "--dry-run")
    assert code == 0 and "--force needed" in out and settings.read_text() == edited
    code, out = _run("config", "claude", "--settings", str(settings), "--restore", "--force")
    assert code == 0 and settings.read_text() == original
    code, out = _run("config", "claude", "--settings", str(settings), "--force")
    assert code == 2 and "--force goes with --restore" in out


def test_symlinked_settings_are_written_through_the_link(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "claude.json"
    target.write_text('{"theme": "dark"}\n')
    link = tmp_path / "settings.json"
    link.symlink_to(target)
    assert _run("config", "claude", "--settings", str(link))[0] == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert "ANTHROPIC_BASE_URL" in json.loads(target.read_text())["env"]
    assert _run("config", "claude", "--settings", str(link), "--restore")[0] == 0
    assert link.is_symlink() and target.read_text() == '{"theme": "dark"}\n'
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    code, out = _run("config", "claude", "--settings", str(fifo))
    assert code == 2 and "not a regular file" in out


def test_backups_are_the_original_bytes_crlf_kept(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    original = b'# mine\r\nmodel = "gpt-5"\r\n\r\n[profiles.fast]\r\nmodel = "o4"\r\n'
    path.write_bytes(original)
    assert _run("config", "codex", "--codex-config", str(path))[0] == 0
    assert (tmp_path / "config.toml.olympiad-proxy.bak").read_bytes() == original
    written = path.read_bytes()
    assert b"\r\n[model_providers.olympiad-proxy]\r\n" in written
    assert written.count(b"\n") == written.count(b"\r\n")  # no bare LF mixed in
    assert tomllib.loads(written.decode())["profiles"]["fast"]["model"] == "o4"
    assert _run("config", "codex", "--codex-config", str(path), "--restore")[0] == 0
    assert path.read_bytes() == original


def test_an_unknown_provider_is_a_config_error_that_exits_not_found(tmp_path: Path) -> None:
    config = load_config(_config(tmp_path, "http://127.0.0.1:9", "http://127.0.0.1:9"))
    with pytest.raises(UnknownProvider) as caught:
        config.provider("nope")
    assert isinstance(caught.value, ProxyConfigError) and isinstance(caught.value, NotFound)
    assert exit_code_for(caught.value) == 6
    assert exit_code_for(ProxyConfigError("x")) == 2
    path = _config(tmp_path, "http://127.0.0.1:9", "http://127.0.0.1:9")
    path.write_text(path.read_text().replace("[server]", 'active = "nope"\n[server]'))
    code, out = _run("proxy", "--config", str(path))
    assert code == 6 and "no provider named 'nope'" in out and "Traceback" not in out
