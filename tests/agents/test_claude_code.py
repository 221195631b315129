"""Claude Code, as shipped on npm, through the proxy to a scripted Chat Completions upstream
(GLM-style) on 127.0.0.1: headless ``claude -p``, configured only by ``solver config claude``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from solver.cli.main import main as solver_cli
from solver.proxy import ProxyDeadlines, ProxyServer
from solver.testing import RecordedRequest
from solver.testing.fake_endpoint import Fault, Reply
from tests.agents.scripts import base_env, jsonl, tool_names, tool_results, user_text
from tests.proxy.helpers import proxied

# quiet and offline: nothing but the proxy is ever contacted
OFFLINE = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}
STALL = 13.0  # the upstream's pause: longer than the client's idle timeout below
CLIENT_IDLE_MS = 10_000  # the shortest stream idle timeout Claude Code accepts


def _answer(request: RecordedRequest) -> Reply:
    asked = user_text(request)
    if "PLAIN" in asked:
        return Reply(text="plain answer through the proxy")
    if "TOOL" in asked:
        results = tool_results(request)
        if results:
            return Reply(text=f"the command said: {results[-1].strip()}")
        command = {"command": "echo agents-round-trip", "description": "print a word"}
        return Reply(
            tool_calls=[("call_1", "Bash", json.dumps(command))], finish_reason="tool_calls"
        )
    if "THINK" in asked:
        return Reply(reasoning="weighing the two options", text="forty-two")
    if "SLOW" in asked:
        stall = float(asked.split("SLOW ", 1)[1].split(":", 1)[0])
        return Reply(text="slow but whole", fault=Fault(stall_after_chunks=2, stall_seconds=stall))
    return Reply(text="ok")  # Claude Code's side requests (titles and the like)


def _configure(home: Path, proxy: ProxyServer) -> dict[str, Any]:
    settings = home / ".claude" / "settings.json"
    result = CliRunner().invoke(
        solver_cli, ["config", "claude", "--settings", str(settings), "--proxy", proxy.url]
    )
    assert result.exit_code == 0, result.output
    loaded: dict[str, Any] = json.loads(settings.read_text())
    return loaded


def _claude(
    binary: Path,
    home: Path,
    prompt: str,
    *extra: str,
    env: dict[str, str] | None = None,
    timeout: float = 180,
) -> list[dict[str, Any]]:
    done = subprocess.run(
        [str(binary), "-p", prompt, "--output-format", "stream-json", "--verbose", *extra],
        cwd=home / "work",
        env={**base_env(home), **OFFLINE, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    events = jsonl(done.stdout)
    assert done.returncode == 0, (done.returncode, done.stdout[-3000:], done.stderr[-3000:])
    return events


def _result(events: list[dict[str, Any]]) -> dict[str, Any]:
    results = [e for e in events if e.get("type") == "result"]
    assert len(results) == 1, events
    return results[0]


def _blocks(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [
        block
        for e in events
        if e.get("type") == "assistant"
        for block in e["message"]["content"]
        if block.get("type") == kind
    ]


def test_plain_prompt_with_the_default_model(claude_bin: Path, agent_home: Path) -> None:
    with proxied(_answer, "chat") as (fake, proxy):
        _configure(agent_home, proxy)
        events = _claude(claude_bin, agent_home, "PLAIN: say something")
    result = _result(events)
    assert result["subtype"] == "success" and not result["is_error"]
    assert result["result"] == "plain answer through the proxy"
    asked = [r for r in fake.requests if "PLAIN" in user_text(r)]
    assert asked, "the prompt never reached the upstream"
    # no model named: Claude Code's default, which turns on its mid-conversation system beta;
    # the GLM-style upstream gets those instructions as user text, never a late system turn
    body = asked[0].json
    assert [m["role"] for m in body["messages"][1:]].count("system") == 0
    late = [
        m
        for m in body["messages"][1:]
        if m["role"] == "user" and "<system-reminder>\\n# Environment" in json.dumps(m)
    ]
    assert late, body["messages"]


def test_tool_round_trip_with_its_bash_tool(claude_bin: Path, agent_home: Path) -> None:
    with proxied(_answer, "chat") as (fake, proxy):
        _configure(agent_home, proxy)
        events = _claude(claude_bin, agent_home, "TOOL: run it", "--allowedTools", "Bash")
    assert _result(events)["result"] == "the command said: agents-round-trip"
    calls = _blocks(events, "tool_use")
    assert [c["name"] for c in calls] == ["Bash"]
    asked = [r for r in fake.requests if "TOOL" in user_text(r)]
    assert "Bash" in tool_names(asked[0])
    assert any("agents-round-trip" in out for out in tool_results(asked[-1]))


def test_thinking_is_shown_as_thinking(claude_bin: Path, agent_home: Path) -> None:
    with proxied(_answer, "chat") as (_, proxy):
        _configure(agent_home, proxy)
        events = _claude(claude_bin, agent_home, "THINK: which one")
    assert _result(events)["result"] == "forty-two"
    thinking = _blocks(events, "thinking")
    assert thinking and "weighing the two options" in thinking[0]["thinking"]
    assert all("weighing" not in b["text"] for b in _blocks(events, "text"))


def _slow(binary: Path, home: Path, stall: float, idle_ms: int, keepalive: float) -> None:
    limits = ProxyDeadlines(keepalive=keepalive, idle=stall + 60)
    with proxied(_answer, "chat", deadlines=limits) as (fake, proxy):
        _configure(home, proxy)
        env = {
            "CLAUDE_STREAM_IDLE_TIMEOUT_MS": str(idle_ms),
            "CLAUDE_BYTE_STREAM_IDLE_TIMEOUT_MS": str(idle_ms),
        }
        events = _claude(
            binary, home, f"SLOW {stall}: take your time", env=env, timeout=stall + 120
        )
        pings = proxy.state.metrics.pings
    assert stall * 1000 > idle_ms
    assert _result(events)["result"] == "slow but whole"
    assert len([r for r in fake.requests if "SLOW" in user_text(r)]) == 1  # no retry
    assert pings >= 1


def test_slow_upstream_outlasts_a_shorter_client_idle_timeout(
    claude_bin: Path, agent_home: Path
) -> None:
    """Pings during a pause longer than the idle timeout asked for. Claude Code 2.1.332 raises
    a stream idle timeout under 300 s to 300 s (and a byte-level one under 10 s to 10 s), so
    this quick form shows the pings and the one whole answer; the ``long`` test below has a
    pause past the 300 s floor."""
    _slow(claude_bin, agent_home, STALL, CLIENT_IDLE_MS, keepalive=2.0)


@pytest.mark.long
@pytest.mark.timeout(600)
def test_a_pause_past_claude_codes_idle_floor(claude_bin: Path, agent_home: Path) -> None:
    _slow(claude_bin, agent_home, 320.0, 300_000, keepalive=15.0)
