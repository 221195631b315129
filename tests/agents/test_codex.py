"""Codex, as shipped on npm, through the proxy to a scripted Chat Completions upstream
(GLM-style) on 127.0.0.1: headless ``codex exec --json``, configured only by ``solver config
codex``, its default model (which sends its tools as namespaced ``additional_tools``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from solver.cli.main import main as solver_cli
from solver.proxy import ProxyDeadlines, ProxyServer
from solver.testing import RecordedRequest
from solver.testing.fake_endpoint import Fault, Reply
from tests.agents.scripts import base_env, jsonl, tool_names, tool_results, user_text
from tests.proxy.helpers import proxied

# quiet and offline: no update check, no analytics, no feedback upload
OFFLINE = [
    "-c", "check_for_update_on_startup=false",
    "-c", "analytics.enabled=false",
    "-c", "feedback.enabled=false",
]  # fmt: skip
STALL = 14.0  # the upstream's pause: longer than the client's idle timeout below
CLIENT_IDLE_MS = 10_000  # Codex treats shorter values as about this much
# Codex's exec tool runs JavaScript; its nested exec_command runs a shell command
EXEC_INPUT = 'const r = await tools.exec_command({cmd: "echo agents-round-trip"});\ntext(r.output);'


def _answer(request: RecordedRequest) -> Reply:
    asked = user_text(request)
    if "PLAIN" in asked:
        return Reply(text="plain answer through the proxy")
    if "TOOL" in asked:
        results = tool_results(request)
        if results:
            return Reply(text=f"the command said: {results[-1].strip().splitlines()[-1]}")
        call = ("call_1", "functions__exec", json.dumps({"input": EXEC_INPUT}))
        return Reply(tool_calls=[call], finish_reason="tool_calls")
    if "THINK" in asked:
        return Reply(reasoning="weighing the two options", text="forty-two")
    if "SLOW" in asked:
        return Reply(text="slow but whole", fault=Fault(stall_after_chunks=2, stall_seconds=STALL))
    return Reply(text="ok")


def _configure(home: Path, proxy: ProxyServer, idle_ms: int = 600_000) -> str:
    config = home / ".codex" / "config.toml"
    result = CliRunner().invoke(
        solver_cli,
        [
            "config",
            "codex",
            "--codex-config",
            str(config),
            "--proxy",
            proxy.url,
            "--idle-timeout-ms",
            str(idle_ms),
        ],
    )
    assert result.exit_code == 0, result.output
    return config.read_text()


def _codex(binary: Path, home: Path, prompt: str, *extra: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [str(binary), "exec", "--json", "--skip-git-repo-check", *OFFLINE, *extra, prompt],
        cwd=home / "work",
        env=base_env(home),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    events = jsonl(done.stdout)
    assert done.returncode == 0, (done.returncode, done.stdout[-3000:], done.stderr[-3000:])
    return events


def _items(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [
        e["item"]
        for e in events
        if e.get("type") == "item.completed" and e["item"].get("type") == kind
    ]


def _said(events: list[dict[str, Any]]) -> str:
    return "".join(item["text"] for item in _items(events, "agent_message"))


def test_plain_prompt_with_the_default_model(codex_bin: Path, agent_home: Path) -> None:
    with proxied(_answer, "chat") as (fake, proxy):
        _configure(agent_home, proxy)
        events = _codex(codex_bin, agent_home, "PLAIN: say something")
    assert _said(events) == "plain answer through the proxy"
    assert [e["type"] for e in events][-1] == "turn.completed"
    asked = [r for r in fake.requests if "PLAIN" in user_text(r)]
    # the tools came as additional_tools namespaces: none may be lost on the way
    names = tool_names(asked[0])
    assert "functions__exec" in names and "clock__sleep" in names


def test_tool_round_trip_with_its_exec_tool(codex_bin: Path, agent_home: Path) -> None:
    with proxied(_answer, "chat") as (fake, proxy):
        _configure(agent_home, proxy)
        events = _codex(
            codex_bin, agent_home, "TOOL: run it", "--dangerously-bypass-approvals-and-sandbox"
        )
    assert _said(events) == "the command said: agents-round-trip"
    asked = [r for r in fake.requests if "TOOL" in user_text(r)]
    assert len(asked) == 2
    # the upstream's call went back to Codex as the custom tool it declared, and its JSON
    # wrapper was taken off: Codex ran the JavaScript, which ran the shell command
    replayed = [
        m for m in asked[1].json["messages"] if m.get("role") == "assistant" and m.get("tool_calls")
    ]
    call = replayed[0]["tool_calls"][0]["function"]
    assert call["name"] == "functions__exec"
    assert json.loads(call["arguments"]) == {"input": EXEC_INPUT}
    assert "agents-round-trip" in tool_results(asked[1])[-1]


def test_thinking_is_shown_as_thinking(codex_bin: Path, agent_home: Path) -> None:
    with proxied(_answer, "chat") as (_, proxy):
        _configure(agent_home, proxy)
        events = _codex(codex_bin, agent_home, "THINK: which one")
    assert _said(events) == "forty-two"
    reasoning = _items(events, "reasoning")
    assert reasoning and "weighing the two options" in reasoning[0]["text"]


def test_slow_upstream_outlasts_a_shorter_client_idle_timeout(
    codex_bin: Path, agent_home: Path
) -> None:
    limits = ProxyDeadlines(keepalive=2.0)  # a data event well inside the client's idle window
    with proxied(_answer, "chat", deadlines=limits) as (fake, proxy):
        config = _configure(agent_home, proxy, idle_ms=CLIENT_IDLE_MS)
        events = _codex(codex_bin, agent_home, "SLOW: take your time")
        pings = proxy.state.metrics.pings
    assert f"stream_idle_timeout_ms = {CLIENT_IDLE_MS}" in config
    assert STALL * 1000 > CLIENT_IDLE_MS
    assert _said(events) == "slow but whole"
    assert len([r for r in fake.requests if "SLOW" in user_text(r)]) == 1  # no retry
    assert pings >= 1
