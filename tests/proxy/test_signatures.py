"""Thinking signatures go back only to the provider that issued them (research b.1, E26): a
bridge-minted one, another Anthropic-protocol provider's (SGLang's ``dummy-signature``) or a
Codex ``encrypted_content`` never reaches an official Anthropic upstream."""

from __future__ import annotations

import json
from typing import Any

import httpx

from solver.proxy import BRIDGE_PREFIX, Provider, ProxyConfig, ProxyServer
from solver.proxy._signature import unwrap, wrap
from solver.testing import FakeEndpoint
from solver.testing.fake_endpoint import Reply
from tests.proxy.helpers import anthropic_client


def _thinking(sent: bytes) -> list[dict[str, Any]]:
    body = json.loads(sent)
    return [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "thinking"
    ]


def test_envelopes_name_their_provider() -> None:
    sealed = wrap("claude", "EqQB.native=")
    assert unwrap(sealed, "claude") == "EqQB.native="
    assert unwrap(sealed, "sglang") is None
    for foreign in ("dummy-signature", "gAAAAABencrypted", "1712345678", f"{BRIDGE_PREFIX}x"):
        assert unwrap(foreign, "claude") is None


def test_a_signature_returns_only_to_the_provider_that_issued_it() -> None:
    thought = Reply(reasoning="deep thought", text="fine")
    with (
        FakeEndpoint(lambda _: thought) as sglang,
        FakeEndpoint(lambda _: Reply(text="ok")) as claude,
        FakeEndpoint(lambda _: Reply(text="ok")) as glm,
    ):
        providers = (
            Provider("sglang", sglang.url, "anthropic"),
            Provider("claude", claude.url, "anthropic"),
            Provider("glm", glm.url + "/v1", "chat"),
        )
        config = ProxyConfig(providers=providers, active="sglang", port=0)
        with ProxyServer(config) as proxy:
            client = anthropic_client(proxy)
            hello = [{"role": "user", "content": "hi"}]
            answer = client.messages.create(model="m", max_tokens=50, messages=hello)
            block = answer.content[0]
            assert block.type == "thinking"
            assert unwrap(block.signature, "sglang") == "sig-fake"
            history = [
                *hello,
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "from sglang", "signature": block.signature},
                    {"type": "text", "text": "fine"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "raw dummy", "signature": "dummy-signature"},
                    {"type": "thinking", "thinking": "bridged", "signature": f"{BRIDGE_PREFIX}x"},
                    {"type": "thinking", "thinking": "claude's", "signature": wrap("claude", "Eq")},
                    {"type": "text", "text": "again"}]},
                {"role": "user", "content": "and now?"},
            ]  # fmt: skip
            for name in ("claude", "sglang", "glm"):
                proxy.state.use(name)
                client.messages.create(model="m", max_tokens=50, messages=history)
            codex = {"model": "m", "input": [
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "codex"}],
                 "encrypted_content": "gAAAAABcodex"},
                {"role": "user", "content": "next"}]}  # fmt: skip
            proxy.state.use("claude")
            assert httpx.post(proxy.url + "/v1/responses", json=codex).status_code == 200
        to_claude = _thinking(claude.requests[0].body)
        assert [(b["thinking"], b["signature"]) for b in to_claude] == [("claude's", "Eq")]
        assert _thinking(claude.requests[1].body) == []  # encrypted_content never a signature
        to_sglang = _thinking(sglang.requests[-1].body)
        assert [(b["thinking"], b["signature"]) for b in to_sglang] == [("from sglang", "sig-fake")]
        to_glm = glm.requests[0].body.decode()
        assert "sig-fake" not in to_glm and "from sglang" in to_glm
