"""The transport against the real embedded llama.cpp server (SmolLM2-135M, 4k context)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from solver.llm import (
    Completion,
    Deadlines,
    Endpoint,
    Message,
    ModelClient,
    Request,
    RetryPolicy,
    decode_stream,
    fold_events,
)
from tests.llm.recorder import Recorder
from tests.local_server import LocalModel

pytestmark = pytest.mark.local_model

DEADLINES = Deadlines(connect=5, first_byte=120, idle=60, total=300)
GREEDY = (("cache_prompt", False),)  # exact text is only reproducible without the prompt cache


def ask(
    local: LocalModel,
    *,
    stream: bool = True,
    max_tokens: int = 16,
    stop: tuple[str, ...] = (),
    **extra: Any,
) -> tuple[Completion, Recorder]:
    request = Request(
        model=local.model,
        messages=(
            Message.text("system", "You are a helpful assistant."),
            Message.text("user", "List the first ten positive integers."),
        ),
        max_tokens=max_tokens,
        temperature=0.0,
        seed=1,
        stop=stop,
        stream=stream,
        extra=GREEDY + tuple(extra.items()),
    )
    recorder = Recorder()

    async def go() -> Completion:
        endpoint = Endpoint(local.base_url, "chat", local.model)
        async with ModelClient(
            endpoint, deadlines=DEADLINES, retry=RetryPolicy(max_attempts=2, initial_wait=0.1)
        ) as client:
            return await client.complete(request, recorder)

    return asyncio.run(go()), recorder


@pytest.fixture(scope="module")
def greedy(local_model: LocalModel) -> tuple[Completion, Recorder]:
    """One greedy streamed answer, shared by the tests that compare against it."""
    return ask(local_model)


def test_streaming_call_with_usage_and_exact_bytes(greedy: tuple[Completion, Recorder]) -> None:
    completion, rec = greedy
    assert completion.text.strip()
    assert completion.finish_reason in ("stop", "length")
    assert completion.usage.input_tokens > 0
    assert 0 < completion.usage.output_tokens <= 16
    end = rec.ends[0]
    assert end.status == 200 and end.ttft_s is not None and end.output_tokens_per_s
    raw = rec.sinks[0].getvalue()
    assert raw.rstrip().endswith(b"data: [DONE]")
    assert fold_events(decode_stream("chat", [raw])) == completion
    assert rec.connections and rec.connections[0].address.startswith("127.0.0.1:")


def test_non_streaming_call_gives_the_same_greedy_text(
    local_model: LocalModel, greedy: tuple[Completion, Recorder]
) -> None:
    streamed, _ = greedy
    whole, rec = ask(local_model, stream=False)
    assert whole.text == streamed.text
    assert whole.usage.output_tokens == streamed.usage.output_tokens
    assert rec.sinks[0].getvalue().startswith(b"{")


def test_stop_sequence_cuts_the_text(
    local_model: LocalModel, greedy: tuple[Completion, Recorder]
) -> None:
    free, _ = greedy
    words = free.text.split()
    assert len(words) >= 4, free.text
    stop = words[len(words) // 2]
    cut, _ = ask(local_model, stop=(stop,))
    assert cut.finish_reason == "stop"
    assert cut.text == free.text[: free.text.index(stop)]


def test_max_tokens_is_capped_at_the_served_context(local_model: LocalModel) -> None:
    # the stop ends the list early: what is checked is the capped request, not a long answer
    completion, rec = ask(local_model, max_tokens=1_000_000, stop=("4",))
    cap = rec.starts[0].max_tokens_cap
    assert cap is not None and 0 < cap < local_model.context_length
    assert rec.starts[0].request.max_tokens == cap
    assert completion.text.strip()


def test_length_finish_when_max_tokens_is_small(local_model: LocalModel) -> None:
    completion, rec = ask(local_model, max_tokens=3)
    assert completion.finish_reason == "length"
    assert completion.usage.output_tokens == 3
    assert rec.ends[0].finish_reason == "length"
