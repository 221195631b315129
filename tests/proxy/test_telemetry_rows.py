"""Every request gets its own telemetry row, even when a client repeats an x-request-id, and a
database from the older schema (keyed by request_id) is upgraded without losing a row."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import httpx

from solver.proxy import summarise
from solver.proxy._telemetry import RequestRecord, TelemetryWriter
from solver.testing.fake_endpoint import Reply
from tests.proxy.helpers import proxied

OLD_SCHEMA = """
CREATE TABLE requests (
    request_id TEXT PRIMARY KEY, client_request_id TEXT NOT NULL, session_id TEXT NOT NULL,
    client_protocol TEXT NOT NULL, provider TEXT NOT NULL, model TEXT NOT NULL,
    upstream_model TEXT NOT NULL, stream INTEGER NOT NULL,
    started_at TEXT NOT NULL, ttfb_ms REAL, duration_ms REAL NOT NULL,
    input_tokens INTEGER NOT NULL, cached_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
    reasoning_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL, status TEXT NOT NULL,
    http_status INTEGER NOT NULL, error TEXT NOT NULL, cases TEXT NOT NULL,
    attempts INTEGER NOT NULL, pings INTEGER NOT NULL, request_body BLOB
);
CREATE INDEX requests_started ON requests (started_at);
"""


def _ids(path: Path, count: int) -> list[tuple[str, str]]:
    deadline = time.monotonic() + 15
    while True:
        db = sqlite3.connect(path)
        rows = db.execute("SELECT id, request_id FROM requests ORDER BY started_at").fetchall()
        db.close()
        if len(rows) >= count:
            return rows
        assert time.monotonic() < deadline, "telemetry rows did not arrive"
        time.sleep(0.05)


def test_a_repeated_request_id_keeps_every_row(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    with proxied(lambda _: Reply(text="ok"), telemetry=db) as (_, proxy):
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        for _ in range(3):
            answer = httpx.post(
                proxy.url + "/v1/chat/completions", json=body, headers={"x-request-id": "same"}
            )
            assert answer.headers["x-request-id"] == "same"
        rows = _ids(db, 3)
    assert [r[1] for r in rows] == ["same"] * 3
    assert len({r[0] for r in rows}) == 3


def test_an_old_database_is_upgraded_with_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.executescript(OLD_SCHEMA)
    for rid in ("a", "b"):
        old.execute(
            "INSERT INTO requests VALUES (?, '', '', 'chat', 'glm', 'm', 'm', 1, ?, 5.0, 9.0,"
            " 10, 0, 3, 0, 0.5, 'success', 200, '', '', 1, 0, NULL)",
            (rid, f"2026-01-01T00:00:0{len(rid)}"),
        )
    old.commit()
    old.close()
    writer = TelemetryWriter(path)
    writer.put(RequestRecord(request_id="a", provider="glm", model="m", started_at="2026-02"))
    writer.close()
    rows = _ids(path, 3)
    assert sorted(r[1] for r in rows) == ["a", "a", "b"]
    assert len({r[0] for r in rows}) == 3
    (summary,) = summarise(path)
    assert summary["requests"] == 3 and summary["output_tokens"] == 6


def test_stats_count_token_counts_apart(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    writer = TelemetryWriter(path)
    common = {"provider": "glm", "model": "m", "started_at": "2026-02"}
    writer.put(RequestRecord(request_id="a", client_protocol="anthropic", **common))  # type: ignore[arg-type]
    for rid in ("b", "c"):
        writer.put(
            RequestRecord(
                request_id=rid,
                client_protocol="anthropic_count_tokens",
                status="upstream_error",
                ttfb_ms=1.0,
                **common,  # type: ignore[arg-type]
            )
        )
    writer.close()
    _ids(path, 3)
    (summary,) = summarise(path)
    assert (summary["requests"], summary["errors"], summary["count_tokens"]) == (1, 0, 2)
    assert summary["ttfb_p50_ms"] is None  # the count calls' timings are not the model's
