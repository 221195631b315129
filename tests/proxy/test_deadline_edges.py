"""Deadline edges: a finished answer whose usage tail never comes is a success, not an error;
a JSON (non-streamed) client gets the idle deadline once the upstream has started, not only
after the first-byte budget."""

from __future__ import annotations

import time

import pytest

from solver.proxy import ProxyDeadlines
from solver.testing.fake_endpoint import Fault, Reply
from tests.proxy.helpers import FRONTS, ask, proxied
from tests.proxy.test_liveness import ERRORS, _protocol_error

# frames sent before the silence: chat stops after its finish chunk (no usage chunk, no
# [DONE]), anthropic after message_delta (no message_stop); responses has no finish before
# its terminal event, so it goes silent after the whole stream.
_AFTER_FINISH = {"chat": 4, "anthropic": 7, "responses": 10}


@pytest.mark.parametrize("upstream", ["chat", "responses", "anthropic"])
@pytest.mark.parametrize(
    "limits",
    [
        ProxyDeadlines(first_byte=5, idle=0.5, keepalive=0.2, open_after=0.05),
        ProxyDeadlines(first_byte=5, idle=60, finish_grace=0.3, keepalive=0.2, open_after=0.05),
    ],
    ids=["idle-first", "grace-first"],
)
def test_finish_chunk_then_silence_is_a_complete_answer(
    upstream: str, limits: ProxyDeadlines
) -> None:
    reply = Reply(text="The answer is 4.", fault=Fault(stall_after_chunks=_AFTER_FINISH[upstream]))
    with proxied([reply], upstream, deadlines=limits) as (_, proxy):
        seen = ask("anthropic", proxy, stream=True, tools=False, timeout=20)
    assert seen.text == "The answer is 4."
    assert seen.stop == "stop"


@pytest.mark.parametrize("front", FRONTS)
def test_a_json_client_gets_the_idle_deadline_mid_stream(front: str) -> None:
    limits = ProxyDeadlines(first_byte=30, idle=1, keepalive=0.2, open_after=0.05)
    reply = Reply(text="a long answer " * 20, fault=Fault(stall_after_chunks=3))
    with proxied([reply], "chat", deadlines=limits) as (_, proxy):
        started = time.monotonic()
        try:
            seen = ask(front, proxy, stream=False, tools=False, timeout=60)
        except ERRORS as exc:
            assert _protocol_error(exc), f"{front}: {type(exc).__name__}: {exc}"
        else:
            assert seen.stop == "failed", seen
        took = time.monotonic() - started
    assert took < limits.first_byte / 2  # the idle deadline ended it, not the first-byte one
