"""What today's Claude Code and Codex send, through the fronts: mid-conversation system
messages, Anthropic-worded refusals, Codex's namespaced, custom and ``additional_tools`` tool
forms both ways, unsupported tools noted, and refused requests' telemetry rows."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from solver.testing import RecordedRequest
from solver.testing.fake_endpoint import Reply
from tests.proxy.helpers import proxied

BOUND = 30
MID_SYSTEM = {
    "model": "claude-opus-5-5",
    "max_tokens": 100,
    "system": [{"type": "text", "text": "you are a helper"}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "say hi"}]},
        {
            "role": "system",
            "content": [{"type": "text", "text": "# Environment\ncwd is /w", "cache_control": {}}],
        },
    ],
}
GRAMMAR = "start: SOURCE\nSOURCE: /[\\s\\S]+/\n"
CODEX_TOOLS = {
    "type": "additional_tools",
    "role": "developer",
    "tools": [
        {
            "type": "namespace",
            "name": "functions",
            "description": "",
            "tools": [
                {
                    "type": "custom",
                    "name": "exec",
                    "description": "Run JavaScript",
                    "format": {"type": "grammar", "syntax": "lark", "definition": GRAMMAR},
                },
                {"type": "function", "name": "wait", "parameters": {"type": "object"}},
            ],
        },
        {
            "type": "namespace",
            "name": "clock",
            "description": "",
            "tools": [{"type": "function", "name": "sleep", "parameters": {"type": "object"}}],
        },
        {"type": "web_search"},
        {"type": "web_search"},
    ],
}


def _post(url: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=BOUND)


def _rows(path: Path, count: int) -> list[sqlite3.Row]:
    deadline = time.monotonic() + 15
    while True:
        db = sqlite3.connect(path)
        db.row_factory = sqlite3.Row
        rows = db.execute("SELECT * FROM requests ORDER BY started_at").fetchall()
        db.close()
        if len(rows) >= count:
            return rows
        assert time.monotonic() < deadline, "telemetry rows did not arrive"
        time.sleep(0.05)


def test_mid_conversation_system_reaches_a_chat_upstream_as_user_text() -> None:
    with proxied(lambda _: Reply(text="hi"), "chat") as (fake, proxy):
        answer = _post(proxy.url, "/v1/messages", MID_SYSTEM)
    assert answer.status_code == 200, answer.text
    messages = fake.requests[0].json["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == "you are a helper"
    text = json.dumps(messages[1]["content"])
    # in place: after the user's words, never merged into the leading system prompt
    assert text.index("say hi") < text.index("<system-reminder>\\n# Environment")


def test_mid_conversation_system_stays_in_place_for_responses_and_anthropic() -> None:
    with proxied(lambda _: Reply(text="hi"), "responses") as (fake, proxy):
        assert _post(proxy.url, "/v1/messages", MID_SYSTEM).status_code == 200
    items = fake.requests[0].json["input"]
    roles = [i.get("role") for i in items if i.get("type", "message") == "message"]
    assert roles[-2:] == ["user", "system"] and "Environment" in json.dumps(items[-1])
    with proxied(lambda _: Reply(text="hi"), "anthropic") as (fake, proxy):
        assert _post(proxy.url, "/v1/messages", MID_SYSTEM).status_code == 200
    sent = fake.requests[0]
    assert [m["role"] for m in sent.json["messages"]] == ["user", "system"]
    assert sent.json["system"] == "you are a helper"
    assert "mid-conversation-system-2026-04-07" in sent.headers.get("anthropic-beta", "")


def _claude_code_would_fall_back(message: str) -> bool:
    """Claude Code's own test (2.1.x) for a 400 that means "resend without the beta"."""
    return ("Unexpected role" in message and "input message role" in message) or bool(
        re.search(r"not supported", message) and re.search(r"role .{0,2}system", message, re.I)
    )


@pytest.mark.parametrize(
    ("message", "words"),
    [
        ({"role": "tool", "content": "x"}, "input message role"),
        ({"role": "user", "content": [{"type": "server_thing"}]}, "Input tag"),
    ],
)
def test_refusals_are_worded_as_anthropic_words_them(message: dict[str, Any], words: str) -> None:
    body = {"model": "m", "max_tokens": 10, "messages": [message]}
    with proxied([], "chat") as (fake, proxy):
        answer = _post(proxy.url, "/v1/messages", body)
    assert answer.status_code == 400 and not fake.requests
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error" and words in error["message"]
    if words == "input message role":
        assert _claude_code_would_fall_back(error["message"])


def _codex_body(*items: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "gpt-6.2-sol",
        "stream": False,
        "store": False,
        "input": [CODEX_TOOLS, {"role": "user", "content": "run it"}, *items],
    }


def _calls(request: RecordedRequest) -> Reply:
    if any(m.get("role") == "tool" for m in request.json["messages"]):
        return Reply(text="done")
    calls = [
        ("call_1", "functions__exec", json.dumps({"input": "text(1 + 1)"})),
        ("call_2", "clock__sleep", json.dumps({"duration_ms": 5})),
    ]
    return Reply(tool_calls=calls, finish_reason="tool_calls")


def test_codex_tools_reach_the_upstream_and_calls_come_back_in_codex_forms(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.sqlite"
    with proxied(_calls, "chat", telemetry=db) as (fake, proxy):
        answer = _post(proxy.url, "/v1/responses", _codex_body())
        assert answer.status_code == 200, answer.text
        output = answer.json()["output"]
        replay = [
            {k: v for k, v in item.items() if k not in ("id", "status")} for item in output
        ] + [
            {"type": "custom_tool_call_output", "call_id": "call_1", "output": "2"},
            {"type": "function_call_output", "call_id": "call_2", "output": "slept"},
        ]
        again = _post(proxy.url, "/v1/responses", _codex_body(*replay))
        assert again.status_code == 200, again.text
        rows = _rows(db, 2)
    tools = {t["function"]["name"]: t["function"] for t in fake.requests[0].json["tools"]}
    assert sorted(tools) == ["clock__sleep", "functions__exec", "functions__wait"]
    exec_tool = tools["functions__exec"]
    assert exec_tool["parameters"]["required"] == ["input"]
    assert GRAMMAR in exec_tool["description"]  # the model is told the input's grammar
    custom, function = output
    assert custom["type"] == "custom_tool_call" and custom["input"] == "text(1 + 1)"
    assert (custom["name"], custom["namespace"]) == ("exec", "functions")
    assert function["type"] == "function_call"
    assert (function["name"], function["namespace"]) == ("sleep", "clock")
    assert json.loads(function["arguments"]) == {"duration_ms": 5}
    # the replayed calls go upstream under the same qualified names, with their outputs
    replayed = next(m for m in fake.requests[1].json["messages"] if m.get("tool_calls"))
    names = [c["function"]["name"] for c in replayed["tool_calls"]]
    assert names == ["functions__exec", "clock__sleep"]
    assert json.loads(replayed["tool_calls"][0]["function"]["arguments"]) == {
        "input": "text(1 + 1)"
    }
    assert again.json()["output"][0]["content"][0]["text"] == "done"
    # web_search cannot be offered to this upstream: said once per request, not dropped unseen
    for row in rows:
        assert row["cases"].split(",").count("E50_tool_web_search_unsupported") == 1


def test_streamed_custom_calls_keep_their_namespace() -> None:
    body = {**_codex_body(), "stream": True}
    with (
        proxied(_calls, "chat") as (_, proxy),
        httpx.stream("POST", proxy.url + "/v1/responses", json=body, timeout=BOUND) as r,
    ):
        frames = [f for f in r.read().decode().split("\n\n") if f]
    events = [json.loads(f.split("data: ", 1)[1]) for f in frames]
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [(i["type"], i["name"], i.get("namespace")) for i in done] == [
        ("custom_tool_call", "exec", "functions"),
        ("function_call", "sleep", "clock"),
    ]
    inputs = [e for e in events if e["type"] == "response.custom_tool_call_input.done"]
    assert inputs and inputs[0]["input"] == "text(1 + 1)"


def test_refused_requests_keep_the_model_and_provider_in_telemetry(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    bad = {"model": "m", "max_tokens": 10, "messages": [{"role": "tool", "content": "x"}]}
    with proxied([], "chat", telemetry=db) as (_, proxy):
        assert _post(proxy.url, "/v1/messages", bad).status_code == 400
        assert _post(proxy.url, "/v1/responses", {"model": "m", "input": []}).status_code == 400
        rows = _rows(db, 2)
    for row in rows:
        assert row["status"] == "bad_request"
        assert (row["model"], row["provider"]) == ("m", "fake")
