"""Catalogue cases of the Responses and Anthropic upstreams (E25, E37, E46, E47), replayed byte
for byte and read through every front by its SDK."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from solver.proxy._signature import unwrap
from solver.testing.fake_endpoint import Reply
from tests.proxy.helpers import FRONTS, anthropic_client, ask, by_user_text, proxied


def ev(name: str, body: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps({'type': name, **body})}\n\n".encode()


CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_r", "name": "get_weather",
        "arguments": '{"city":"Oslo"}', "status": "completed"}  # fmt: skip
TEXT = {"type": "output_text", "text": "Checking.", "annotations": []}
MESSAGE = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
           "content": [TEXT]}  # fmt: skip
USAGE = {"input_tokens": 30, "output_tokens": 9, "input_tokens_details": {"cached_tokens": 10},
         "output_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
RESPONSES = {
    # E46: no item events at all; the items only come in response.completed
    "E46": [
        ev("response.created", {"response": {"id": "r1", "status": "in_progress", "output": []}}),
        ev("response.completed", {"response": {"id": "r1", "status": "completed",
                                               "output": [MESSAGE, CALL], "usage": USAGE}}),
    ],
    # E47: call_id cleared in output_item.done
    "E47": [
        ev("response.created", {"response": {"id": "r2", "status": "in_progress", "output": []}}),
        ev("response.output_item.added", {"output_index": 0, "item": {**CALL, "arguments": "",
                                                                      "status": "in_progress"}}),
        ev("response.function_call_arguments.delta", {"output_index": 0, "item_id": "fc_1",
                                                      "delta": '{"city":"Oslo"}'}),
        ev("response.output_item.done", {"output_index": 0, "item": {**CALL, "call_id": ""}}),
        ev("response.completed", {"response": {"id": "r2", "status": "completed",
                                               "output": [CALL], "usage": USAGE}}),
    ],
}  # fmt: skip

START = ev("message_start", {"message": {"id": "m", "type": "message", "role": "assistant",
           "content": [], "model": "c", "usage": {"input_tokens": 20, "output_tokens": 1,
                                                  "cache_read_input_tokens": 5}}})  # fmt: skip
ANTHROPIC = {
    "E25": [
        START,
        ev("content_block_start", {"index": 0, "content_block": {"type": "thinking",
                                                                 "thinking": "", "signature": ""}}),
        ev("content_block_delta", {"index": 0, "delta": {"type": "thinking_delta",
                                                         "thinking": "native thought"}}),
        ev("content_block_delta", {"index": 0, "delta": {"type": "signature_delta",
                                                         "signature": "EqQBnativeSig"}}),
        ev("content_block_stop", {"index": 0}),
        ev("content_block_start", {"index": 1, "content_block": {"type": "text", "text": ""}}),
        ev("content_block_delta", {"index": 1, "delta": {"type": "text_delta", "text": "Hi."}}),
        ev("content_block_stop", {"index": 1}),
        ev("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}}),
        ev("message_stop", {}),
    ],
    "E37": [
        START,
        ev("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ev("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "par"}}),
        ev("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ],
}  # fmt: skip


@pytest.mark.parametrize("front", FRONTS)
def test_responses_upstream_items(front: str) -> None:
    replies = {name: Reply(raw_chunks=frames) for name, frames in RESPONSES.items()}
    with proxied(by_user_text(replies), "responses") as (_, proxy):
        for case in ("E46", "E47"):
            seen = ask(front, proxy, stream=True, user=case)
            assert [(i, n, a) for i, n, a in seen.tools] == [
                ("call_r", "get_weather", {"city": "Oslo"})
            ], case
            assert seen.stop == "tool_calls"
        assert ask(front, proxy, stream=True, user="E46").text == "Checking."


@pytest.mark.parametrize("front", FRONTS)
def test_anthropic_upstream_signature_and_overload(front: str) -> None:
    replies = {name: Reply(raw_chunks=frames) for name, frames in ANTHROPIC.items()}
    with proxied(by_user_text(replies), "anthropic") as (_, proxy):
        seen = ask(front, proxy, stream=True, user="E25", tools=False)
        assert (seen.thinking, seen.text, seen.stop) == ("native thought", "Hi.", "stop")
        assert (seen.input_tokens, seen.cached_tokens, seen.output_tokens) == (25, 5, 7)
        if front == "anthropic":  # the native signature, sealed with the provider's name
            with anthropic_client(proxy).messages.stream(
                model="c", max_tokens=50, messages=[{"role": "user", "content": "E25"}]
            ) as stream:
                message = stream.get_final_message()
            signature = message.content[0].signature  # type: ignore[union-attr]
            assert unwrap(signature, "fake") == "EqQBnativeSig"
        try:
            failed = ask(front, proxy, stream=True, user="E37", tools=False).stop == "failed"
        except (anthropic.APIError, openai.APIError):
            failed = True
        assert failed
