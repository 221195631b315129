"""Tool ids reach Anthropic clients and Anthropic upstreams in the alphabet they accept
(research b.2: ``^[a-zA-Z0-9_-]+$``) and go back to the server that issued them unchanged."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from solver.proxy._toolids import for_anthropic, original
from solver.testing.fake_endpoint import Reply
from tests.proxy.helpers import TOOLS_A, anthropic_client, proxied

KIMI_ID = "functions.get_weather:0"
SAFE = re.compile(r"[a-zA-Z0-9_-]+")


def test_the_mapping_round_trips_and_leaves_safe_ids_alone() -> None:
    for tool_id in (KIMI_ID, "call 1", "ü:2", ""):
        mapped = for_anthropic(tool_id)
        assert SAFE.fullmatch(mapped) and original(mapped) == tool_id
    assert for_anthropic("toolu_01AbC-x") == "toolu_01AbC-x"
    assert original("olyt_notmine") == "olyt_notmine"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
def test_an_openai_style_id_reaches_claude_safe_and_returns_as_issued(stream: bool) -> None:
    call = Reply(tool_calls=[(KIMI_ID, "get_weather", '{"city":"Oslo"}')],
                 finish_reason="tool_calls")  # fmt: skip
    replies = {"weather?": call, "weather?done": Reply(text="sunny")}

    def respond(request: object) -> Reply:
        texts = [m["content"] for m in json.loads(request.body)["messages"]  # type: ignore[attr-defined]
                 if m["role"] in ("user", "tool") and isinstance(m["content"], str)]  # fmt: skip
        return replies["".join(texts)]

    with proxied(respond, "chat") as (fake, proxy):
        client = anthropic_client(proxy)
        ask = [{"role": "user", "content": "weather?"}]
        if stream:
            with client.messages.stream(model="m", max_tokens=50, messages=ask,
                                        tools=TOOLS_A) as events:  # fmt: skip
                message = events.get_final_message()
        else:
            message = client.messages.create(model="m", max_tokens=50, messages=ask, tools=TOOLS_A)
        use = message.content[0]
        assert use.type == "tool_use" and SAFE.fullmatch(use.id), use
        history = [
            *ask,
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": use.id, "name": use.name, "input": use.input}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": use.id, "content": "done"}]},
        ]  # fmt: skip
        client.messages.create(model="m", max_tokens=50, messages=history, tools=TOOLS_A)
        sent = json.loads(fake.requests[-1].body)["messages"]
    assert sent[1]["tool_calls"][0]["id"] == KIMI_ID
    assert sent[2]["tool_call_id"] == KIMI_ID


def test_an_anthropic_upstream_gets_safe_ids_from_a_chat_client() -> None:
    with proxied(lambda _: Reply(text="ok"), "anthropic") as (fake, proxy):
        body = {
            "model": "m",
            "messages": [
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": KIMI_ID, "type": "function",
                     "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}}]},
                {"role": "tool", "tool_call_id": KIMI_ID, "content": "sunny"},
            ],
        }  # fmt: skip
        answer = httpx.post(proxy.url + "/v1/chat/completions", json=body, timeout=15)
        assert answer.status_code == 200, answer.text
        sent = json.loads(fake.requests[-1].body)["messages"]
    use = sent[1]["content"][0]
    result = sent[2]["content"][0]
    assert use["type"] == "tool_use" and SAFE.fullmatch(use["id"])
    assert result["tool_use_id"] == use["id"] and original(use["id"]) == KIMI_ID
