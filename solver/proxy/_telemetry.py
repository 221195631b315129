"""Per-request telemetry in SQLite, written off the streaming path (docs/proxy.md, Telemetry).

The request handler fills a :class:`RequestRecord` and hands it to :meth:`TelemetryWriter.put`
(a queue append); a background thread batches the inserts, so no request ever waits on SQLite.
API keys are never part of a record; request bodies only when ``store_bodies`` is set. Each
row has its own ``id``; ``request_id`` (the correlation id) may repeat when a client reuses it.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
import time
from dataclasses import astuple, dataclass, field, fields
from pathlib import Path
from typing import Any

from solver.errors import ConfigError

from ._wire import uuid7

SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    id TEXT PRIMARY KEY,
    request_id TEXT NOT NULL,
    client_request_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    client_protocol TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    upstream_model TEXT NOT NULL,
    upstream_id TEXT NOT NULL,
    stream INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    ttfb_ms REAL,
    duration_ms REAL NOT NULL,
    input_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    reasoning_tokens INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    status TEXT NOT NULL,
    http_status INTEGER NOT NULL,
    error TEXT NOT NULL,
    cases TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    pings INTEGER NOT NULL,
    request_body BLOB
);
CREATE INDEX IF NOT EXISTS requests_started ON requests (started_at);
CREATE INDEX IF NOT EXISTS requests_request_id ON requests (request_id);
"""


@dataclass(slots=True)
class RequestRecord:
    """One client request. ``status``: success | truncated | upstream_error | upstream_idle |
    client_cancel | bad_request | no_route: the request's outcome; the last two are refusals
    answered with a 4xx before any upstream was asked."""

    request_id: str  # the correlation id (the client's x-request-id): may repeat
    id: str = field(default_factory=uuid7)  # the row's own key, unique per request
    client_request_id: str = ""
    session_id: str = ""
    client_protocol: str = ""
    provider: str = ""
    model: str = ""
    upstream_model: str = ""
    upstream_id: str = ""  # the server's response id (SGLang's request id): joins with its logs
    stream: bool = False
    started_at: str = ""
    ttfb_ms: float | None = None
    duration_ms: float = 0.0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0
    status: str = "success"
    http_status: int = 200
    error: str = ""
    cases: str = ""
    attempts: int = 0
    pings: int = 0
    request_body: bytes | None = field(default=None, repr=False)


BATCH_SECONDS = 0.25
_COLUMNS = [f.name for f in fields(RequestRecord)]
_INSERT = (
    f"INSERT INTO requests ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' for _ in _COLUMNS)})"
)


def check_database(path: Path) -> None:
    """Open (or create) the telemetry file once, so that a file that is not a database, or
    one that cannot be written, is a clear configuration error before the server starts."""
    try:
        connect(path).close()
    except sqlite3.Error as exc:
        raise ConfigError(f"{path}: not a usable telemetry database ({exc})") from None


def connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=30)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    _migrate(db)
    db.executescript(SCHEMA)
    return db


def _migrate(db: sqlite3.Connection) -> None:
    """A database from before the ``id`` column keyed rows by ``request_id``, so a repeated
    x-request-id replaced a row. Rebuild it under the new schema, keeping every row (their old
    key, unique there, becomes their ``id``)."""
    columns = [row[1] for row in db.execute("PRAGMA table_info(requests)")]
    if not columns or "id" in columns:
        return
    wanted = [f for f in fields(RequestRecord) if f.name != "id"]
    names = ", ".join(f.name for f in wanted)
    # a column the old table lacks gets the record's default
    values = ", ".join(f.name if f.name in columns else "?" for f in wanted)
    defaults = [f.default for f in wanted if f.name not in columns]
    db.execute("BEGIN IMMEDIATE")  # one transaction: a crash leaves the old table as it was
    try:
        db.execute("ALTER TABLE requests RENAME TO requests_v1")
        db.execute("DROP INDEX IF EXISTS requests_started")
        for statement in SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute(
            f"INSERT INTO requests (id, {names}) SELECT request_id, {values} FROM requests_v1",
            defaults,
        )
        db.execute("DROP TABLE requests_v1")
    except BaseException:
        db.rollback()
        raise
    db.commit()


class TelemetryWriter:
    """Owns the database connection in its own thread. ``close`` drains and joins."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._queue: queue.SimpleQueue[RequestRecord | None] = queue.SimpleQueue()
        path.parent.mkdir(parents=True, exist_ok=True)
        connect(path).close()  # fail early (bad path, read-only dir) in the caller's thread
        self._thread = threading.Thread(target=self._run, name="proxy-telemetry", daemon=True)
        self._thread.start()

    def put(self, record: RequestRecord) -> None:
        self._queue.put(record)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)

    def _run(self) -> None:
        db = connect(self.path)
        try:
            while True:
                item = self._queue.get()
                batch = [item]
                # gather for a moment: one transaction per batch, not per request, keeps this
                # thread (and its share of the GIL) off the streaming path
                stop = time.monotonic() + BATCH_SECONDS
                while item is not None and (left := stop - time.monotonic()) > 0:
                    try:
                        item = self._queue.get(timeout=left)
                    except queue.Empty:
                        break
                    batch.append(item)
                rows = [astuple(r) for r in batch if r is not None]
                if rows:
                    with db:
                        db.executemany(_INSERT, rows)
                if any(r is None for r in batch):
                    return
        finally:
            db.close()


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


COUNT_TOKENS = "anthropic_count_tokens"


def summarise(path: Path) -> list[dict[str, Any]]:
    """One row per (provider, model): requests, errors, p50/p99 TTFB, tokens and cost.
    ``count_tokens`` calls are no model requests: they are counted apart, in ``count_tokens``."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT provider, model, status, ttfb_ms, input_tokens, cached_tokens, "
            "output_tokens, reasoning_tokens, cost_usd, duration_ms, client_protocol "
            "FROM requests"
        ).fetchall()
    finally:
        db.close()
    groups: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for row in rows:
        groups.setdefault((row[0], row[1]), []).append(row)
    out = []
    for (provider, model), every in sorted(groups.items()):
        items = [r for r in every if r[10] != COUNT_TOKENS]
        ttfb = [r[3] for r in items if r[3] is not None]
        out.append(
            {
                "provider": provider,
                "model": model,
                "requests": len(items),
                "errors": sum(1 for r in items if r[2] != "success"),
                "count_tokens": len(every) - len(items),
                "ttfb_p50_ms": _percentile(ttfb, 0.5),
                "ttfb_p99_ms": _percentile(ttfb, 0.99),
                "input_tokens": sum(r[4] for r in items),
                "cached_tokens": sum(r[5] for r in items),
                "output_tokens": sum(r[6] for r in items),
                "reasoning_tokens": sum(r[7] for r in items),
                "cost_usd": sum(r[8] for r in items),
                "duration_s": sum(r[9] for r in items) / 1000,
            }
        )
    return out
