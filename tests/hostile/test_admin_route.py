"""Issue 15, finding 9: the proxy's admin route bounds its body and answers 4xx, never 500,
to malformed input; a property test throws arbitrary bodies and headers at it."""

from __future__ import annotations

import asyncio
import json

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from solver.proxy import Provider, ProxyConfig
from solver.proxy._app import MAX_ADMIN_BODY_BYTES, build_app

LOOPBACK = ("127.0.0.1", 50000)


def _config() -> ProxyConfig:
    providers = (
        Provider("a", "http://127.0.0.1:9/v1", "chat"),
        Provider("b", "http://127.0.0.1:9/v1", "chat"),
    )
    return ProxyConfig(providers=providers, active="a")


def _post(body: bytes, content_type: str = "application/json") -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=build_app(_config()), client=LOOPBACK)
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as http:
            headers = {"content-type": content_type}
            return await http.post("/admin/active", content=body, headers=headers)

    return asyncio.run(go())


def test_deeply_nested_json_is_a_400() -> None:
    answer = _post(b"[" * 100_000 + b"]" * 100_000)
    assert answer.status_code == 413  # over the bound before it is parsed at all
    answer = _post(b"[" * 1000 + b"]" * 1000)
    assert answer.status_code == 400
    assert answer.json() == {"error": 'body must be {"provider": NAME}'}


def test_the_body_is_bounded() -> None:
    padding = " " * MAX_ADMIN_BODY_BYTES
    answer = _post(json.dumps({"provider": "b", "pad": padding}).encode())
    assert answer.status_code == 413
    assert _post(json.dumps({"provider": "b"}).encode()).status_code == 200


def test_malformed_bodies_are_4xx() -> None:
    for body in (b"", b"{", b"null", b"[]", b'{"provider": 5}', b"\xff\xfe", b'"b"'):
        assert _post(body).status_code == 400, body
    assert _post(b'{"provider": "nope"}').status_code == 404


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=st.one_of(
        st.binary(max_size=600),
        _JSON.map(lambda v: json.dumps(v).encode()),
        st.builds(lambda v: json.dumps({"provider": v}).encode(), _JSON),
    ),
    content_type=st.sampled_from(["application/json", "text/plain", "", "application/x-www"]),
)
def test_any_body_gets_a_client_error_or_a_switch(body: bytes, content_type: str) -> None:
    answer = _post(body, content_type)
    assert answer.status_code in (200, 400, 404, 413), (answer.status_code, answer.text)
    assert answer.headers["content-type"].startswith("application/json")
