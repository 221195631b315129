"""GLM with thinking on by default and no reasoning parser: the prompt ends in ``<think>``, so
the answer arrives as "reasoning</think>answer". A client that sent no thinking request must
still get the reasoning as thinking, streamed or not, on every front, from a provider marked
``split_think = true``; by default and with ``split_think = false`` plain text streams as is."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.proxy._config import ProxyConfigError, load_config
from solver.testing.fake_endpoint import Reply
from tests.proxy.helpers import FRONTS, ask, proxied

ORPHAN = "let me think about it</think>The answer is 4."


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("front", FRONTS)
def test_an_orphan_close_tag_splits_with_no_thinking_request(front: str, stream: bool) -> None:
    with proxied([Reply(text=ORPHAN, chunk_chars=5)], "chat", split_think=True) as (fake, proxy):
        seen = ask(front, proxy, stream=stream, tools=False)
    assert "chat_template_kwargs" not in fake.requests[0].json  # no thinking request went up
    assert seen.text == "The answer is 4."
    assert seen.thinking == "let me think about it"
    assert seen.stop == "stop"


@pytest.mark.parametrize("split_think", [None, False], ids=["default", "off"])
def test_a_provider_without_split_think_passes_the_text_through(split_think: bool | None) -> None:
    with proxied([Reply(text=ORPHAN)], "chat", split_think=split_think) as (_, proxy):
        seen = ask("chat", proxy, stream=True, tools=False)
    assert seen.text == ORPHAN
    assert seen.thinking == ""


def test_split_think_is_unset_unless_the_config_says(tmp_path: Path) -> None:
    base = '[[providers]]\nname = "glm"\nbase_url = "http://127.0.0.1:30000/v1"\n'
    seen = []
    for extra in ("", "split_think = true\n", "split_think = false\n"):
        path = tmp_path / "proxy.toml"
        path.write_text(base + extra)
        seen.append(load_config(path).providers[0].split_think)
    assert seen == [None, True, False]
    path.write_text(base + 'split_think = "yes"\n')
    with pytest.raises(ProxyConfigError, match="split_think"):
        load_config(path)
