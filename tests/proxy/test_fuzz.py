"""Fuzzed request bodies: bad input gets a 4xx in the client's protocol, never a 5xx or a hang.

Bodies are valid requests with fields replaced by arbitrary JSON, or arbitrary JSON, or bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from solver.proxy import ProxyServer
from solver.testing import echo_responder
from tests.proxy.helpers import TOOLS_A, TOOLS_C, TOOLS_R, proxied

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                max_size=4),
    max_leaves=12,
)  # fmt: skip

VALID: dict[str, dict[str, Any]] = {
    "/v1/messages": {
        "model": "g",
        "max_tokens": 64,
        "stream": False,
        "tools": TOOLS_A,
        "system": [{"type": "text", "text": "be brief"}],
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t", "signature": "s"},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}],
            },
        ],
    },
    "/v1/chat/completions": {
        "model": "g",
        "max_tokens": 64,
        "stream": False,
        "tools": TOOLS_C,
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ],
    },
    "/v1/responses": {
        "model": "g",
        "stream": False,
        "tools": TOOLS_R,
        "instructions": "be brief",
        "reasoning": {"effort": "high"},
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "t"}]},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        ],
    },
}


@pytest.fixture(scope="module")
def proxy() -> Iterator[ProxyServer]:
    with proxied(echo_responder, "chat") as (_, server):
        yield server


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    """One client for every example, since a new one loads the CA bundle again (tens of ms);
    still a new connection each, as before, so no example meets a connection another closed."""
    with httpx.Client(timeout=30, headers={"connection": "close"}) as client:
        yield client


def _mutate(body: Any, path: list[Any], value: Any) -> Any:
    """``body`` with the element at ``path`` (indices taken modulo the container) replaced."""
    if not path or not isinstance(body, dict | list) or not body:
        return value
    if isinstance(body, dict):
        keys = sorted(body)
        key = keys[path[0] % len(keys)] if isinstance(path[0], int) else path[0]
        return {**body, key: _mutate(body.get(key), path[1:], value)}
    index = path[0] % len(body) if isinstance(path[0], int) else 0
    return [*body[:index], _mutate(body[index], path[1:], value), *body[index + 1 :]]


def _check(http: httpx.Client, proxy: ProxyServer, route: str, content: bytes) -> None:
    response = http.post(proxy.url + route, content=content,
                         headers={"content-type": "application/json"})  # fmt: skip
    assert response.status_code < 500, (content[:300], response.status_code, response.text)
    if response.status_code >= 400:
        error = response.json()
        if route == "/v1/messages":
            assert error["type"] == "error" and error["error"]["message"]
        else:
            assert error["error"]["message"]


ROUTES = sorted(VALID)
FUZZ = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip


@pytest.mark.parametrize("route", ROUTES)
@FUZZ
@given(path=st.lists(st.integers(0, 7), max_size=5), value=json_values)
def test_mutated_valid_bodies(
    http: httpx.Client, proxy: ProxyServer, route: str, path: list[int], value: Any
) -> None:
    body = _mutate(VALID[route], path, value)
    _check(http, proxy, route, json.dumps(body, allow_nan=True).encode())


@pytest.mark.parametrize("route", ROUTES)
@FUZZ
@given(body=json_values | st.binary(max_size=64).map(lambda b: b.decode("latin-1")))
def test_arbitrary_bodies(http: httpx.Client, proxy: ProxyServer, route: str, body: Any) -> None:
    content = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else json.dumps(
        body).encode()  # fmt: skip
    _check(http, proxy, route, content)


def test_the_valid_bodies_are_answered(proxy: ProxyServer) -> None:
    for route in ROUTES:
        response = httpx.post(proxy.url + route, json=VALID[route], timeout=30)
        assert response.status_code == 200, response.text
