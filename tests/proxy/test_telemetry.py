"""Telemetry rows, correlation ids, cost, metrics, the token rule, and thinking signatures that
never reach an official Anthropic upstream."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import httpx
import pytest

from solver.proxy import (
    BRIDGE_PREFIX,
    Price,
    Provider,
    ProxyConfig,
    ProxyConfigError,
    ProxyServer,
    summarise,
)
from solver.proxy._signature import wrap
from solver.testing import FakeEndpoint
from solver.testing.fake_endpoint import Fault, Reply
from tests.proxy.helpers import anthropic_client, ask, proxied

SECRET = "sk-test-very-secret-key-123"


def _rows(path: Path, count: int) -> list[sqlite3.Row]:
    deadline = time.monotonic() + 15
    while True:
        if path.exists():
            db = sqlite3.connect(path)
            db.row_factory = sqlite3.Row
            rows = db.execute("SELECT * FROM requests ORDER BY started_at").fetchall()
            db.close()
            if len(rows) >= count:
                return rows
        assert time.monotonic() < deadline, "telemetry rows did not arrive"
        time.sleep(0.05)


def test_a_row_per_request_with_ids_tokens_cost_and_cases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", SECRET)
    reply = Reply(reasoning="r", text="hello", usage=(1_000_000, 500_000), cached_tokens=250_000)
    db = tmp_path / "telemetry.sqlite"
    with FakeEndpoint(lambda _: reply) as fake:
        provider = Provider(
            "glm", fake.url + "/v1", "chat", api_key_env="FAKE_KEY",
            price=Price(input=2.0, cached_input=0.5, output=8.0),
        )  # fmt: skip
        config = ProxyConfig(providers=(provider,), active="glm", port=0, telemetry=db)
        with ProxyServer(config) as proxy:
            headers = {"x-request-id": "corr-1", "x-client-request-id": "cli-9",
                       "x-claude-code-session-id": "sess-7"}  # fmt: skip
            body = {"model": "claude-x", "max_tokens": 10, "stream": True,
                    "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
            response = httpx.post(proxy.url + "/v1/messages", json=body, headers=headers)
            assert response.headers["x-request-id"] == "corr-1"
            assert "message_stop" in response.text
            ask("chat", proxy, stream=False, tools=False)
            metrics = httpx.get(proxy.url + "/metrics").text
        assert fake.requests[0].headers["authorization"] == f"Bearer {SECRET}"
        assert fake.requests[0].headers["x-request-id"] == "corr-1"
    rows = _rows(db, 2)
    first = rows[0]
    assert (first["request_id"], first["client_request_id"], first["session_id"]) == (
        "corr-1", "cli-9", "sess-7",
    )  # fmt: skip
    assert (first["client_protocol"], first["provider"], first["model"]) == (
        "anthropic", "glm", "claude-x",
    )  # fmt: skip
    assert first["status"] == "success" and first["stream"] == 1
    assert first["upstream_id"]  # the fake's chunk id, to join with the server's logs
    assert (first["input_tokens"], first["cached_tokens"], first["output_tokens"]) == (
        1_000_000, 250_000, 500_000,
    )  # fmt: skip
    assert first["cost_usd"] == pytest.approx(750_000 * 2e-6 + 250_000 * 0.5e-6 + 500_000 * 8e-6)
    assert first["ttfb_ms"] is not None and first["duration_ms"] >= first["ttfb_ms"]
    assert first["request_body"] is None
    assert rows[1]["client_protocol"] == "chat" and rows[1]["stream"] == 0
    assert SECRET.encode() not in db.read_bytes()
    assert 'proxy_requests_total{front="anthropic",provider="glm",status="success"} 1' in metrics
    assert 'proxy_tokens_total{provider="glm",model="claude-x",kind="cached"} 250000' in metrics
    summary = summarise(db)
    assert [(s["provider"], s["model"], s["requests"]) for s in summary] == [
        ("glm", "claude-x", 1), ("glm", "glm", 1),
    ]  # fmt: skip


def test_upstream_errors_never_carry_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KEY", SECRET)
    reply = Reply(fault=Fault(status=401, message=f"bad key {SECRET}"))
    with FakeEndpoint(lambda _: reply) as fake:
        provider = Provider("glm", fake.url + "/v1", "chat", api_key_env="FAKE_KEY")
        config = ProxyConfig(providers=(provider,), active="glm", port=0)
        with ProxyServer(config) as proxy:
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            response = httpx.post(proxy.url + "/v1/chat/completions", json=body)
    assert response.status_code == 401
    assert SECRET not in response.text and "***" in response.text


def test_non_loopback_needs_a_token_and_the_token_is_checked() -> None:
    provider = Provider("p", "http://127.0.0.1:9/v1", "chat")
    with pytest.raises(ProxyConfigError, match="needs a token"):
        ProxyServer(ProxyConfig(providers=(provider,), active="p", host="0.0.0.0", port=0))
    with proxied(lambda _: Reply(text="ok"), "chat", token="t0k") as (_, proxy):
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        url = proxy.url + "/v1/chat/completions"
        assert httpx.post(url, json=body).status_code == 401
        assert httpx.post(url, json=body, headers={"authorization": "Bearer nope"}).status_code \
            == 401  # fmt: skip
        assert httpx.post(url, json=body, headers={"authorization": "Bearer t0k"}).status_code \
            == 200  # fmt: skip
        anthropic_body = {"model": "m", "max_tokens": 5,
                          "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
        ok = httpx.post(proxy.url + "/v1/messages", json=anthropic_body,
                        headers={"x-api-key": "t0k"})  # fmt: skip
        assert ok.status_code == 200
        assert httpx.get(proxy.url + "/metrics").status_code == 401


def test_bridge_signatures_never_reach_an_anthropic_upstream() -> None:
    reply = Reply(text="fine")
    with FakeEndpoint(lambda _: reply) as glm, FakeEndpoint(lambda _: reply) as claude:
        providers = (
            Provider("glm", glm.url + "/v1", "chat"),
            Provider("claude", claude.url, "anthropic"),
        )
        with ProxyServer(ProxyConfig(providers=providers, active="glm", port=0)) as proxy:
            client = anthropic_client(proxy)
            hello = [{"role": "user", "content": "hi"}]
            first = client.messages.create(model="m", max_tokens=50, messages=hello)
            assert first.content[0].type == "text"
            minted = f"{BRIDGE_PREFIX}abc"
            history = [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "glm thought", "signature": minted},
                    {"type": "text", "text": "hello"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "claude thought",
                     "signature": wrap("claude", "EqQBnative")},
                    {"type": "text", "text": "again"}]},
                {"role": "user", "content": "and now?"},
            ]  # fmt: skip
            proxy.state.use("claude")
            client.messages.create(model="m", max_tokens=50, messages=history)
            proxy.state.use("glm")
            client.messages.create(model="m", max_tokens=50, messages=history)
        sent = claude.requests[-1].body.decode()
        assert BRIDGE_PREFIX not in sent and "glm thought" not in sent
        assert "EqQBnative" in sent and "claude thought" in sent and "olys-sig" not in sent
        to_glm = json.loads(glm.requests[-1].body)
        assert "EqQBnative" not in glm.requests[-1].body.decode()
        assert "glm thought" in json.dumps(to_glm)


def test_count_tokens_and_models(tmp_path: Path) -> None:
    with proxied(lambda _: Reply(text="x"), "chat") as (_, proxy):
        body = {"model": "m", "messages": [{"role": "user", "content": "hello " * 100}]}
        response = httpx.post(proxy.url + "/v1/messages/count_tokens", json=body)
        assert response.status_code == 200
        assert response.headers["x-token-count"] in ("upstream", "estimate")
        assert response.json()["input_tokens"] > 100
        bad = httpx.post(proxy.url + "/v1/messages/count_tokens", json={"model": "m"})
        assert bad.status_code == 400 and bad.json()["type"] == "error"
        assert httpx.get(proxy.url + "/health").json()["status"] == "ok"
        models = httpx.get(proxy.url + "/v1/models").json()
        assert models["object"] == "list"
        version = {"anthropic-version": "2023-06-01"}
        anthropic_models = httpx.get(proxy.url + "/v1/models", headers=version).json()
        assert anthropic_models["has_more"] is False
