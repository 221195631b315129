"""Small protocol details: the Responses front types a 429 as a rate limit, and count_tokens
echoes the correlation id and leaves a telemetry row like every other request."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import httpx

from solver.testing.fake_endpoint import Fault, Reply
from tests.proxy.helpers import proxied


def test_a_429_reaches_a_responses_client_as_a_rate_limit() -> None:
    refused = Reply(text="x", fault=Fault(status=429, retry_after=1, message="slow down"))
    with proxied(lambda _: refused, "chat") as (_, proxy):
        answer = httpx.post(proxy.url + "/v1/responses", json={"model": "m", "input": "hi"})
    assert answer.status_code == 429
    assert answer.json()["error"]["type"] == "rate_limit_error"


def test_count_tokens_echoes_the_request_id_and_is_recorded(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    body = {"model": "m", "messages": [{"role": "user", "content": "hello " * 50}]}
    with proxied(lambda _: Reply(text="x"), "chat", telemetry=db) as (_, proxy):
        answer = httpx.post(proxy.url + "/v1/messages/count_tokens", json=body,
                            headers={"x-request-id": "count-1"})  # fmt: skip
        assert answer.status_code == 200 and answer.headers["x-request-id"] == "count-1"
        bad = httpx.post(proxy.url + "/v1/messages/count_tokens", json={"model": "m"})
        assert bad.status_code == 400 and bad.headers["x-request-id"]
    deadline = time.monotonic() + 15
    while True:
        connection = sqlite3.connect(db)
        rows = connection.execute(
            "SELECT request_id, client_protocol, provider, status, http_status FROM requests "
            "ORDER BY started_at"
        ).fetchall()
        connection.close()
        if len(rows) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert rows[0] == ("count-1", "anthropic_count_tokens", "fake", "success", 200)
    # refused, but its row still names the provider that would have served model "m"
    assert rows[1][1:] == ("anthropic_count_tokens", "fake", "bad_request", 400)
