"""An upstream key never reaches a client or the telemetry database, whatever way the upstream
sends the message that quotes it (HTTP status, in-stream error, or a cut-off message)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import httpx
import pytest

from solver.llm import redact
from solver.proxy import Provider, ProxyConfig, ProxyServer
from solver.testing import FakeEndpoint, fake_wire
from solver.testing.fake_endpoint import Fault, Reply

SECRET = "sk-live-0123456789-SECRET"
_BODIES = {
    "/v1/messages": {
        "model": "m",
        "max_tokens": 20,
        "messages": [{"role": "user", "content": "x"}],
    },
    "/v1/chat/completions": {"model": "m", "messages": [{"role": "user", "content": "x"}]},
    "/v1/responses": {"model": "m", "input": "x"},
}


def _leaky_error(api: str) -> bytes:
    """The fake's in-stream error, but quoting the key the way a real provider might."""
    message = f"invalid key {SECRET}"
    if api == "chat":
        return fake_wire.data_frame(fake_wire.chat_error(message, 401)) + fake_wire.DONE
    if api == "responses":
        failed = {"id": "r", "object": "response", "status": "failed",
                  "error": {"code": "invalid_api_key", "message": message}}  # fmt: skip
        event = {"type": "response.failed", "sequence_number": 0, "response": failed}
        return fake_wire.event_frame("response.failed", event)
    error = {"type": "error", "error": {"type": "authentication_error", "message": message}}
    return fake_wire.event_frame("error", error)


def _rows(path: Path, count: int) -> list[str]:
    deadline = time.monotonic() + 15
    while True:
        if path.exists():
            db = sqlite3.connect(path)
            rows = [r[0] for r in db.execute("SELECT error FROM requests").fetchall()]
            db.close()
            if len(rows) >= count:
                return rows
        assert time.monotonic() < deadline, "telemetry rows did not arrive"
        time.sleep(0.05)


@pytest.mark.parametrize("upstream", ["chat", "responses", "anthropic"])
def test_an_in_stream_error_quoting_the_key_is_scrubbed(
    upstream: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEAKY_KEY", SECRET)
    monkeypatch.setattr(fake_wire, "in_stream_error", _leaky_error)
    # before any output (a JSON error answer) and after some (a streamed error frame)
    replies = {
        "early": Reply(text="t" * 40, chunk_chars=4, fault=Fault(error_event_after_chunks=0)),
        "late": Reply(text="t" * 40, chunk_chars=4, fault=Fault(error_event_after_chunks=4)),
    }
    db = tmp_path / "t.sqlite"
    with FakeEndpoint(lambda r: replies[r.user_text]) as fake:
        provider = Provider("p", fake.url + "/v1", upstream, api_key_env="LEAKY_KEY")  # type: ignore[arg-type]
        config = ProxyConfig(providers=(provider,), active="p", port=0, telemetry=db)
        sent = 0
        with ProxyServer(config) as proxy:
            for path, base in _BODIES.items():
                for user in replies:
                    for stream in (True, False):
                        body = dict(base, stream=stream)
                        if "messages" in body:
                            body["messages"] = [{"role": "user", "content": user}]
                        else:
                            body["input"] = user
                        answer = httpx.post(proxy.url + path, json=body, timeout=15)
                        sent += 1
                        assert "SECRET" not in answer.text, (path, user, stream, answer.text)
                        assert "invalid key ***" in answer.text or answer.status_code == 200
        errors = _rows(db, sent)
    assert all("SECRET" not in e for e in errors)
    assert any("invalid key ***" in e for e in errors)


def test_redact_also_hides_a_key_cut_off_at_the_end() -> None:
    assert redact(f"bad key {SECRET[:12]}", [SECRET]) == "bad key ***"
    assert redact(f"a {SECRET} b {SECRET}", [SECRET, ""]) == "a *** b ***"
    assert redact("nothing here", [SECRET]) == "nothing here"
