"""The real llama-server with SmolLM2 speaks the OpenAI protocol the way the transport expects.

Exact-text comparisons send ``cache_prompt: false`` (a llama-server extension): temperature 0
is deterministic only for a fixed prompt-cache state (a cached prefix changes the batch
shapes, and so the floating-point sums).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.local_server import LocalModel

pytestmark = pytest.mark.local_model

PROMPT = "Write three sentences about the sea."


def _body(model: LocalModel, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model.model,
        "messages": [{"role": "user", "content": PROMPT}],
        "temperature": 0,
        "max_tokens": 48,
        "cache_prompt": False,
    }
    body.update(extra)
    return body


def _complete(model: LocalModel, **extra: Any) -> dict[str, Any]:
    response = httpx.post(
        f"{model.base_url}/chat/completions", json=_body(model, **extra), timeout=120
    )
    response.raise_for_status()
    data: dict[str, Any] = response.json()
    return data


def _stream(model: LocalModel, **extra: Any) -> list[dict[str, Any]]:
    chunks: list[dict[str, Any]] = []
    body = _body(model, stream=True, **extra)
    with httpx.stream(
        "POST", f"{model.base_url}/chat/completions", json=body, timeout=120
    ) as response:
        response.raise_for_status()
        saw_done = False
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            payload = line.removeprefix("data: ")
            if payload == "[DONE]":
                saw_done = True
                continue
            chunks.append(json.loads(payload))
    assert saw_done, "the stream did not end with [DONE]"
    return chunks


def _streamed_text(chunks: list[dict[str, Any]]) -> str:
    return "".join(
        choice["delta"].get("content") or "" for chunk in chunks for choice in chunk["choices"]
    )


def _finish_reason(chunks: list[dict[str, Any]]) -> str | None:
    reasons = [c["finish_reason"] for chunk in chunks for c in chunk["choices"]]
    return next((r for r in reversed(reasons) if r), None)


def test_models_endpoint_lists_the_alias_and_health_is_ok(local_model: LocalModel) -> None:
    models = httpx.get(f"{local_model.base_url}/models", timeout=10).json()
    assert [entry["id"] for entry in models["data"]] == ["smollm2-135m"]
    assert httpx.get(f"{local_model.root_url}/health", timeout=10).json() == {"status": "ok"}


def test_server_allocated_the_requested_context(local_model: LocalModel) -> None:
    props = httpx.get(f"{local_model.root_url}/props", timeout=10).json()
    assert props["default_generation_settings"]["n_ctx"] == local_model.context_length


def test_non_streaming_reply_carries_text_and_usage(local_model: LocalModel) -> None:
    data = _complete(local_model)
    choice = data["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"].strip()
    usage = data["usage"]
    assert usage["prompt_tokens"] > 5
    assert 0 < usage["completion_tokens"] <= 48
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_stream_reports_usage_when_asked_and_matches_non_stream(
    local_model: LocalModel,
) -> None:
    chunks = _stream(local_model, stream_options={"include_usage": True})
    usage_chunks = [chunk for chunk in chunks if chunk.get("usage")]
    assert len(usage_chunks) == 1
    assert usage_chunks[0] is chunks[-1] and chunks[-1]["choices"] == []
    text = _streamed_text(chunks)
    assert len([c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]) > 1
    plain = _complete(local_model)
    assert text == plain["choices"][0]["message"]["content"]
    assert usage_chunks[0]["usage"]["completion_tokens"] == plain["usage"]["completion_tokens"]
    assert _finish_reason(chunks) == plain["choices"][0]["finish_reason"]


def test_stream_without_include_usage_sends_no_usage_chunk(local_model: LocalModel) -> None:
    chunks = _stream(local_model)
    assert not any(chunk.get("usage") for chunk in chunks)
    assert _streamed_text(chunks).strip()


def test_temperature_zero_is_deterministic_with_prompt_cache_off(
    local_model: LocalModel,
) -> None:
    texts = {_complete(local_model)["choices"][0]["message"]["content"] for _ in range(3)}
    assert len(texts) == 1


def test_max_tokens_caps_the_reply_with_finish_length(local_model: LocalModel) -> None:
    data = _complete(local_model, max_tokens=5)
    assert data["choices"][0]["finish_reason"] == "length"
    assert data["usage"]["completion_tokens"] == 5
    chunks = _stream(local_model, max_tokens=5, stream_options={"include_usage": True})
    assert _finish_reason(chunks) == "length"
    assert chunks[-1]["usage"]["completion_tokens"] == 5


def test_stop_sequence_ends_the_reply_before_the_stop_text(local_model: LocalModel) -> None:
    full = _complete(local_model)["choices"][0]["message"]["content"]
    words = full.split()
    assert len(words) >= 6, f"reply too short to pick a stop word from: {full!r}"
    stop = " " + words[4]  # a word from inside the reply, so the stop must trigger
    expected = full[: full.index(stop)]

    stopped = _complete(local_model, stop=[stop])
    assert stopped["choices"][0]["finish_reason"] == "stop"
    assert stopped["choices"][0]["message"]["content"] == expected

    chunks = _stream(local_model, stop=[stop])
    assert _finish_reason(chunks) == "stop"
    assert _streamed_text(chunks) == expected


def test_prompt_beyond_the_context_is_refused_not_truncated(local_model: LocalModel) -> None:
    too_long = "sea " * (local_model.context_length + 100)
    response = httpx.post(
        f"{local_model.base_url}/chat/completions",
        json={
            "model": local_model.model,
            "messages": [{"role": "user", "content": too_long}],
            "max_tokens": 4,
        },
        timeout=120,
    )
    assert response.status_code == 400
    assert "context" in response.text.lower()
