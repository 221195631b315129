"""Every front protocol on every upstream protocol, streamed and not, through the real SDKs:
text, thinking, tool calls, stop reason and usage (research b.1-b.4)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from solver.proxy import ProxyServer
from solver.testing import FakeEndpoint
from solver.testing.fake_endpoint import Reply
from tests.proxy.helpers import FRONTS, UPSTREAMS, ask, by_user_text, proxied

REPLIES = {
    "tool": Reply(
        reasoning="The user wants the weather; call the tool.",
        text="Let me check.",
        tool_calls=[("call_w1", "get_weather", '{"city":"Paris"}')],
        finish_reason="tool_calls",
        usage=(1000, 50),
        cached_tokens=200,
        chunk_chars=5,
    ),
    "parallel": Reply(
        text="Two cities.",
        tool_calls=[
            ("call_a", "get_weather", '{"city":"Oslo"}'),
            ("call_b", "get_weather", '{"city":"Lima"}'),
        ],
        finish_reason="tool_calls",
        usage=(300, 40),
        chunk_chars=4,
    ),
    "plain": Reply(
        reasoning="Easy.", text="Paris is the capital of France. 北京 é ü", usage=(20, 12)
    ),
    "long": Reply(reasoning="Thinking " * 20, text="cut", finish_reason="length", usage=(9, 64)),
}


@pytest.fixture(scope="module", params=UPSTREAMS)
def upstream(request: pytest.FixtureRequest) -> Iterator[tuple[str, FakeEndpoint, ProxyServer]]:
    with proxied(by_user_text(REPLIES), request.param) as (fake, proxy):
        yield request.param, fake, proxy


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("front", FRONTS)
def test_tool_call_with_thinking_and_usage(
    upstream: tuple[str, FakeEndpoint, ProxyServer], front: str, stream: bool
) -> None:
    _, fake, proxy = upstream
    seen = ask(front, proxy, stream=stream, user="tool")
    assert seen.text == "Let me check."
    assert seen.thinking == "The user wants the weather; call the tool."
    assert [(name, args) for _, name, args in seen.tools] == [("get_weather", {"city": "Paris"})]
    assert seen.tools[0][0]
    assert seen.stop == "tool_calls"
    assert (seen.input_tokens, seen.cached_tokens, seen.output_tokens) == (1000, 200, 50)
    assert fake.errors == []


@pytest.mark.parametrize("front", FRONTS)
def test_parallel_calls_keep_order_and_ids(
    upstream: tuple[str, FakeEndpoint, ProxyServer], front: str
) -> None:
    _, _, proxy = upstream
    seen = ask(front, proxy, stream=True, user="parallel")
    assert [args["city"] for _, _, args in seen.tools] == ["Oslo", "Lima"]
    assert len({call_id for call_id, _, _ in seen.tools}) == 2
    assert seen.stop == "tool_calls" and seen.text == "Two cities."


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("front", FRONTS)
def test_text_and_length(
    upstream: tuple[str, FakeEndpoint, ProxyServer], front: str, stream: bool
) -> None:
    _, _, proxy = upstream
    plain = ask(front, proxy, stream=stream, user="plain", tools=False)
    assert plain.text == "Paris is the capital of France. 北京 é ü"
    assert plain.stop == "stop" and plain.output_tokens == 12
    long = ask(front, proxy, stream=stream, user="long", tools=False)
    assert long.stop == "length" and long.text == "cut"
