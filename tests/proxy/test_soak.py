"""Soak: 32 concurrent clients for 30 minutes (``PROXY_SOAK_SECONDS`` to change) through every
front, against an upstream that stalls, resets, truncates, errors, refuses and prefills slowly.
Clients are spread over Chat, Responses and Anthropic upstreams. Zero client streams may hang:
each must end in an answer or a protocol error within a bound set by the proxy's deadlines; a
client-side timeout or a dropped connection counts as a hang."""

from __future__ import annotations

import contextlib
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

from solver.proxy import ProxyDeadlines
from solver.testing.fake_endpoint import Fault, Reply
from tests.proxy.helpers import FRONTS, ask, proxied

CLIENTS = 32
LIMITS = ProxyDeadlines(first_byte=3, idle=2, keepalive=0.5, open_after=0.3, max_wall=60)
HANG_BOUND = 45.0  # far above every deadline: a request slower than this hung
# the SDKs' own timeout must lie above the bound, or a silent stream would end as a timeout
# error and be counted as an answer instead of a hang
CLIENT_TIMEOUT = HANG_BOUND + 30
# a dropped connection or a client-side timeout is no protocol error: the proxy went silent
HUNG = (anthropic.APIConnectionError, openai.APIConnectionError)
UPSTREAM_OF_CLIENT = ("chat", "chat", "responses", "anthropic")  # client number % 4

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
    with contextlib.ExitStack() as stack:
        proxies = {
            api: stack.enter_context(proxied(_responder, api, deadlines=LIMITS))[1]
            for api in set(UPSTREAM_OF_CLIENT)
        }
        stop = time.monotonic() + seconds

        def client(number: int) -> None:
            rng = random.Random(number)
            upstream = UPSTREAM_OF_CLIENT[number % len(UPSTREAM_OF_CLIENT)]
            proxy = proxies[upstream]
            while time.monotonic() < stop:
                front = rng.choice(FRONTS)
                user = f"client {number} request {rng.random()}"
                started = time.monotonic()
                timed_out = False
                try:
                    seen = ask(front, proxy, stream=rng.random() < 0.8, user=user,
                               timeout=CLIENT_TIMEOUT)  # fmt: skip
                    outcome = "failed" if seen.stop == "failed" else "answered"
                except HUNG as exc:
                    outcome, timed_out = type(exc).__name__, True
                except (anthropic.APIError, openai.APIError) as exc:
                    outcome = type(exc).__name__
                elapsed = time.monotonic() - started
                with lock:
                    outcomes[f"{upstream}:{outcome}"] += 1
                    if elapsed > HANG_BOUND or timed_out:
                        hung.append(f"{upstream}->{front} {user}: {outcome} {elapsed:.1f}s")

        threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(seconds + HANG_BOUND * 2)
        assert not any(t.is_alive() for t in threads), "a client thread never came back"
        deadline = time.monotonic() + 10
        in_flight = lambda: sum(p.state.metrics.in_flight for p in proxies.values())  # noqa: E731
        while in_flight() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert in_flight() == 0
    assert hung == []
    for api in proxies:
        assert outcomes[f"{api}:answered"] > 0, api
    assert sum(outcomes.values()) > CLIENTS
    print(dict(outcomes))
