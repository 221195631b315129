"""The proxy's line per request: front, provider and model, status, time to first byte,
tokens and the (redacted) error; nothing when no log stream is given (``--quiet``)."""

from __future__ import annotations

import io
import re

import openai
import pytest

from solver.proxy import Provider, ProxyConfig, ProxyServer
from solver.testing import FakeEndpoint
from solver.testing.fake_endpoint import Fault, Reply
from tests.proxy.helpers import ask

SECRET = "sk-live-" + "q" * 40
KEY_ENV = "SOLVER_TEST_REQUEST_LOG_KEY"


def _config(url: str) -> ProxyConfig:
    provider = Provider("glm", url + "/v1", "chat", upstream_model="glm-4.6", api_key_env=KEY_ENV)
    return ProxyConfig(providers=(provider,), active="glm", host="127.0.0.1", port=0)


def test_one_line_per_request_with_what_happened(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    replies = [
        Reply(text="fine", usage=(12, 3)),
        Reply(fault=Fault(status=401, message=f"bad key {SECRET}")),
    ]
    log = io.StringIO()
    with FakeEndpoint(replies) as fake, ProxyServer(_config(fake.url), request_log=log) as proxy:
        assert ask("anthropic", proxy, stream=True, tools=False).text == "fine"
        with pytest.raises(openai.APIStatusError):
            ask("chat", proxy, stream=False, tools=False)
    first, second = log.getvalue().splitlines()
    assert re.fullmatch(
        r"\d\d:\d\d:\d\d anthropic glm/glm-4\.6 200 success ttfb=\d+ms [\d.]+s tokens=12/3", first
    ), first
    assert re.match(r"\d\d:\d\d:\d\d chat glm/glm-4\.6 401 upstream_error ttfb=- ", second)
    assert 'error="upstream glm answered 401: bad key ***"' in second
    assert SECRET not in log.getvalue()


def test_no_log_stream_no_lines() -> None:
    with FakeEndpoint([Reply(text="fine")]) as fake, ProxyServer(_config(fake.url)) as proxy:
        assert proxy.state.request_log is None
        assert ask("chat", proxy, stream=True, tools=False).text == "fine"
