"""Before an official Anthropic upstream: a tool turn whose thinking had to be dropped is asked
without thinking, and a 400 that refuses a thinking signature is retried once, on the same
provider, with every thinking part stripped."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

from solver.proxy import Provider, ProxyConfig, ProxyServer
from solver.proxy._signature import wrap
from solver.testing import FakeEndpoint
from solver.testing.fake_endpoint import Fault, Reply
from tests.proxy.helpers import TOOLS_A, anthropic_client

REFUSAL = "messages.1.content.0: Invalid `signature` in `thinking` block"


def _history(signature: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "weather in Paris?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "use the tool", "signature": signature},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}],
        },
    ]


def _ask(replies: list[Reply], signature: str) -> tuple[str, list[dict[str, Any]]]:
    with FakeEndpoint(replies) as claude:
        config = ProxyConfig(
            providers=(Provider("claude", claude.url, "anthropic"),), active="claude", port=0
        )
        with ProxyServer(config) as proxy:
            message = anthropic_client(proxy).messages.create(
                model="claude",
                max_tokens=2048,
                messages=_history(signature),  # type: ignore[arg-type]
                tools=TOOLS_A,  # type: ignore[arg-type]
                thinking={"type": "enabled", "budget_tokens": 1024},
            )
        claude.assert_consumed()
        text = "".join(b.text for b in message.content if b.type == "text")
        return text, [json.loads(r.body) for r in claude.requests]


def _thinking_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "thinking"
    ]


def test_a_refused_signature_is_retried_once_without_thinking() -> None:
    refused = Reply(fault=Fault(status=400, message=REFUSAL))
    text, sent = _ask([refused, Reply(text="sunny, 20 C")], wrap("claude", "Eq"))
    assert text == "sunny, 20 C"
    assert len(sent) == 2
    assert [b["signature"] for b in _thinking_parts(sent[0])] == ["Eq"]
    assert _thinking_parts(sent[1]) == []
    assert sent[1]["thinking"] == {"type": "disabled"}  # the tool turn lost its thinking


def test_a_tool_turn_whose_thinking_was_dropped_is_asked_without_thinking() -> None:
    text, sent = _ask([Reply(text="sunny")], "dummy-signature")
    assert text == "sunny"
    assert _thinking_parts(sent[0]) == []
    assert sent[0]["thinking"] == {"type": "disabled"}


def test_another_400_is_not_retried() -> None:
    with FakeEndpoint([Reply(fault=Fault(status=400, message="max_tokens too large"))]) as up:
        config = ProxyConfig(providers=(Provider("c", up.url, "anthropic"),), active="c", port=0)
        with ProxyServer(config) as proxy, pytest.raises(anthropic.BadRequestError, match="max"):
            anthropic_client(proxy).messages.create(
                model="c", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
        assert len(up.requests) == 1
