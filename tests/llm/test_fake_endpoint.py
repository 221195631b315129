"""The scripted fake endpoint itself: protocols, faults and the strict script."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from solver.testing import FakeEndpoint
from solver.testing.fake_endpoint import Fault, Reply

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def test_chat_stream_has_sglang_shape() -> None:
    reply = Reply(text="Hello", reasoning="hmm", finish_reason="stop", chunk_chars=2)
    with FakeEndpoint([reply]) as fake:
        body = {**CHAT, "stream_options": {"include_usage": True}}
        response = httpx.post(fake.url + "/v1/chat/completions", json=body)
        fake.assert_consumed()
    frames = [f for f in response.content.split(b"\n\n") if f]
    assert frames[-1] == b"data: [DONE]"
    usage = json.loads(frames[-2][len(b"data: ") :])
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] >= 1
    finish = json.loads(frames[-3][len(b"data: ") :])
    assert finish["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "stop",
    }
    assert fake.requests[0].user_text == "hi"


def test_strict_script_rejects_an_extra_request() -> None:
    with FakeEndpoint([Reply(text="one")]) as fake:
        httpx.post(fake.url + "/v1/chat/completions", json={**CHAT, "stream": False})
        extra = httpx.post(fake.url + "/v1/chat/completions", json={**CHAT, "stream": False})
        assert extra.status_code == 500
        with pytest.raises(AssertionError, match="unexpected"):
            fake.assert_consumed()


def test_unconsumed_script_fails_the_assertion() -> None:
    with FakeEndpoint([Reply(text="one")]) as fake, pytest.raises(AssertionError, match="never"):
        fake.assert_consumed()


def test_status_fault_carries_retry_after() -> None:
    with FakeEndpoint([Reply(fault=Fault(status=429, retry_after=3))]) as fake:
        response = httpx.post(fake.url + "/v1/messages", json={**CHAT, "max_tokens": 4})
    assert response.status_code == 429
    assert response.headers["retry-after"] == "3"
    assert response.json()["error"]["type"] == "rate_limit_error"


def test_reset_fault_breaks_the_connection() -> None:
    reply = Reply(text="x" * 80, fault=Fault(reset_after_chunks=2))
    with FakeEndpoint([reply]) as fake, pytest.raises(httpx.HTTPError):
        httpx.post(fake.url + "/v1/chat/completions", json=CHAT)


def test_truncate_fault_ends_cleanly_without_done() -> None:
    with FakeEndpoint([Reply(text="x" * 80, fault=Fault(truncate_after_chunks=3))]) as fake:
        response = httpx.post(fake.url + "/v1/chat/completions", json=CHAT)
    assert response.status_code == 200
    assert response.content.count(b"data: ") == 3
    assert b"[DONE]" not in response.content


def test_models_reports_context_length() -> None:
    with FakeEndpoint([], served_model="glm-x", context_length=4096) as fake:
        data = httpx.get(fake.url + "/v1/models").json()["data"]
    assert data == [{"id": "glm-x", "object": "model", "owned_by": "fake", "max_model_len": 4096}]


def test_runs_as_its_own_process_and_stops_on_sigterm() -> None:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "solver.testing.fake_endpoint",
            "--port",
            "0",
            "--responder",
            "solver.testing.fake_endpoint:echo_responder",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=root,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().split()
        assert line[0] == "READY" and line[1].startswith("http://127.0.0.1:")
        body = {**CHAT, "stream": False}
        answer = httpx.post(line[1] + "/v1/chat/completions", json=body, timeout=10).json()
        assert answer["choices"][0]["message"]["content"] == "echo: hi"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
