"""Soak: 32 concurrent clients for 30 minutes (``PROXY_SOAK_SECONDS`` to change) through every
front, against an upstream that stalls, resets, truncates, errors, refuses and prefills slowly.
Zero client streams may hang: each must end in an answer or a protocol error within a bound
set by the proxy's deadlines."""

from __future__ import annotations

import os
import random
import threading
import time
import zlib
from collections import Counter
from typing import Any

import anthropic
import openai
import pytest

from serve.proxy import Deadlines
from tests.fakes.fake_endpoint import Fault, Reply
from tests.proxy.helpers import FRONTS, ask, proxied

CLIENTS = 32
LIMITS = Deadlines(first_byte=3, idle=2, keepalive=0.5, open_after=0.3, max_wall=60)
HANG_BOUND = 45.0  # far above every deadline: a request slower than this hung

FAULTS = [
    None, None, None, None,
    Fault(stall_after_chunks=3), Fault(reset_after_chunks=2), Fault(truncate_after_chunks=4),
    Fault(error_event_after_chunks=3), Fault(status=429, retry_after=1), Fault(status=503),
    Fault(prefill_delay=1.0), Fault(prefill_delay=10.0),
]  # fmt: skip


def _responder(request: Any) -> Reply:
    pick = zlib.crc32(request.user_text.encode())
    fault = FAULTS[pick % len(FAULTS)]
    return Reply(reasoning="think " * 5, text="answer " * 10, chunk_chars=6, fault=fault,
                 tool_calls=[("call_s", "get_weather", '{"city":"Rome"}')] if pick % 3 == 0
                 else [], finish_reason="tool_calls" if pick % 3 == 0 else "stop")  # fmt: skip


@pytest.mark.soak
def test_no_hung_stream_under_faults() -> None:
    seconds = float(os.environ.get("PROXY_SOAK_SECONDS", "1800"))
    outcomes: Counter[str] = Counter()
    hung: list[str] = []
    lock = threading.Lock()
    with proxied(_responder, "chat", deadlines=LIMITS) as (_, proxy):
        stop = time.monotonic() + seconds

        def client(number: int) -> None:
            rng = random.Random(number)
            while time.monotonic() < stop:
                front = rng.choice(FRONTS)
                user = f"client {number} request {rng.random()}"
                started = time.monotonic()
                try:
                    seen = ask(front, proxy, stream=rng.random() < 0.8, user=user)
                    outcome = "failed" if seen.stop == "failed" else "answered"
                except (anthropic.APIError, openai.APIError) as exc:
                    outcome = type(exc).__name__
                elapsed = time.monotonic() - started
                with lock:
                    outcomes[outcome] += 1
                    if elapsed > HANG_BOUND:
                        hung.append(f"{front} {user}: {elapsed:.1f}s")

        threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(seconds + HANG_BOUND * 2)
        assert not any(t.is_alive() for t in threads), "a client thread never came back"
        deadline = time.monotonic() + 10
        while proxy.state.metrics.in_flight and time.monotonic() < deadline:
            time.sleep(0.1)
        assert proxy.state.metrics.in_flight == 0
    assert hung == []
    assert outcomes["answered"] > 0 and sum(outcomes.values()) > CLIENTS
    print(dict(outcomes))
