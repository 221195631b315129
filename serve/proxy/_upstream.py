"""The upstream leg: the request for a provider, HTTP clients, and upstream errors.

Each provider gets a few ``httpx.AsyncClient`` instances used round-robin: one big shared pool
makes httpcore scan every pooled connection per request, which costs more CPU than the proxy
itself at 64 concurrent streams (research/peer-measurements.md §1.3).
"""

from __future__ import annotations

import functools
import itertools
import ssl
from dataclasses import replace

import httpx
import orjson

from solver.llm.codec import PATHS, encode_request
from solver.llm.errors import UnsupportedRequest
from solver.llm.events import Request

from . import _signature
from ._config import Deadlines, Provider
from ._parse import FrontError
from ._turn import TurnFailure

_CLIENTS_PER_PROVIDER = 8
_ERROR_BODY_LIMIT = 64 * 1024


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every client: building one costs milliseconds each."""
    return httpx.create_ssl_context()


class UpstreamClients:
    def __init__(self, providers: tuple[Provider, ...], deadlines: Deadlines) -> None:
        timeout = httpx.Timeout(connect=deadlines.connect, read=None, write=60.0, pool=None)
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=32)
        self._pools: dict[str, itertools.cycle[httpx.AsyncClient]] = {}
        self._all: list[httpx.AsyncClient] = []
        for provider in providers:
            clients = [
                httpx.AsyncClient(timeout=timeout, limits=limits, trust_env=False, verify=_tls())
                for _ in range(_CLIENTS_PER_PROVIDER)
            ]
            self._all.extend(clients)
            self._pools[provider.name] = itertools.cycle(clients)

    def client(self, provider: Provider) -> httpx.AsyncClient:
        return next(self._pools[provider.name])

    async def aclose(self) -> None:
        for client in self._all:
            await client.aclose()


def upstream_request(request: Request, provider: Provider) -> tuple[Request, list[str]]:
    """The canonical request as this provider gets it: its model name, always streamed (the
    idle deadline needs bytes to watch), and thinking signatures it may see (E26)."""
    cases: list[str] = []
    changes: dict[str, object] = {"stream": True}
    if provider.upstream_model:
        changes["model"] = provider.upstream_model
    request = replace(request, **changes)  # type: ignore[arg-type]
    if provider.api == "anthropic":
        request, dropped = _signature.for_anthropic_upstream(request)
        if dropped:
            cases.append("E26_foreign_thinking_dropped")
    else:
        request = _signature.for_other_upstream(request)
    return request, cases


def encode(provider: Provider, request: Request) -> bytes:
    try:
        return encode_request(provider.api, request)
    except UnsupportedRequest as exc:
        raise FrontError(400, f"provider {provider.name!r} ({provider.api}): {exc}") from None
    except (ValueError, TypeError) as exc:
        raise FrontError(400, f"cannot encode the request for {provider.api}: {exc}") from None


def headers(provider: Provider, request_id: str) -> dict[str, str]:
    out = {
        "content-type": "application/json",
        "accept": "text/event-stream",
        "accept-encoding": "identity",
        "x-request-id": request_id,
    }
    key = provider.api_key()
    if provider.api == "anthropic":
        out["anthropic-version"] = "2023-06-01"
        if key:
            out["x-api-key"] = key
    elif key:
        out["authorization"] = f"Bearer {key}"
    return out


def url(provider: Provider) -> str:
    return provider.url(PATHS[provider.api])


def _message_of(body: bytes) -> str:
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body[:300].decode("utf-8", "replace").strip()
    if isinstance(value, dict):
        error = value.get("error", value)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])[:500]
        if isinstance(error, str):
            return error[:500]
    return body[:300].decode("utf-8", "replace").strip()


async def status_failure(response: httpx.Response, provider: Provider) -> TurnFailure:
    """A non-2xx upstream answer as a failure; 408/409/429 and 5xx may succeed elsewhere."""
    body = b""
    async for chunk in response.aiter_raw():
        body += chunk
        if len(body) > _ERROR_BODY_LIMIT:
            break
    message = _message_of(body) or response.reason_phrase
    key = provider.api_key()
    if key:
        message = message.replace(key, "***")
    status = response.status_code
    retryable = status in (408, 409, 429) or (status >= 500 and status != 501)
    return TurnFailure(
        kind="rate_limited" if status == 429 else "upstream_status",
        message=f"upstream {provider.name} answered {status}: {message}",
        status=status,
        retryable=retryable,
    )
