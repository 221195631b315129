"""GLM with thinking on by default and no reasoning parser: the prompt ends in ``<think>``, so
the answer arrives as "reasoning</think>answer". A client that sent no thinking request must
still get the reasoning as thinking, streamed or not, on every front; a provider marked
``split_think = false`` streams plain text as is."""

from __future__ import annotations

import pytest

from tests.fakes.fake_endpoint import Reply
from tests.proxy.helpers import FRONTS, ask, proxied

ORPHAN = "let me think about it</think>The answer is 4."


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("front", FRONTS)
def test_an_orphan_close_tag_splits_with_no_thinking_request(front: str, stream: bool) -> None:
    with proxied([Reply(text=ORPHAN, chunk_chars=5)], "chat") as (fake, proxy):
        seen = ask(front, proxy, stream=stream, tools=False)
    assert "chat_template_kwargs" not in fake.requests[0].json  # no thinking request went up
    assert seen.text == "The answer is 4."
    assert seen.thinking == "let me think about it"
    assert seen.stop == "stop"


def test_a_provider_without_split_think_passes_the_text_through() -> None:
    with proxied([Reply(text=ORPHAN)], "chat", split_think=False) as (_, proxy):
        seen = ask("chat", proxy, stream=True, tools=False)
    assert seen.text == ORPHAN
    assert seen.thinking == ""
