"""The upstream leg: the request for a provider, HTTP clients, and upstream errors.

Streams go through :class:`Http1Pool` (one per provider; see ``_http1`` for why not httpx);
the occasional side request (``count_tokens``) uses one ``httpx.AsyncClient``.
"""

from __future__ import annotations

import functools
import ssl
from dataclasses import replace

import httpx
import orjson

from solver.wire import (
    PATHS,
    Request,
    UnsupportedRequest,
    encode_request,
    redact,
    request_headers,
    retry_after_seconds,
    retryable_status,
)

from . import _signature, _system, _toolids
from ._config import Provider, ProxyDeadlines
from ._http1 import Http1Error, Http1Pool, Http1Response
from ._parse import FrontError
from ._toolnames import shorten
from ._turn import TurnFailure

_ERROR_BODY_LIMIT = 64 * 1024


@functools.cache
def _tls() -> ssl.SSLContext:
    """A TLS context with the CA bundle loaded; building one costs milliseconds, so the
    proxy builds one and shares it between its clients."""
    return httpx.create_ssl_context()


class UpstreamClients:
    def __init__(self, providers: tuple[Provider, ...], deadlines: ProxyDeadlines) -> None:
        tls = _tls()
        self._pools = {p.name: Http1Pool(deadlines.connect, tls) for p in providers}
        timeout = httpx.Timeout(connect=deadlines.connect, read=30.0, write=30.0, pool=None)
        self.side = httpx.AsyncClient(timeout=timeout, trust_env=False, verify=tls)

    def pool(self, provider: Provider) -> Http1Pool:
        return self._pools[provider.name]

    async def aclose(self) -> None:
        for pool in self._pools.values():
            await pool.aclose()
        await self.side.aclose()


def upstream_request(
    request: Request, provider: Provider, *, strip_thinking: bool = False
) -> tuple[Request, list[str], dict[str, str]]:
    """The canonical request as this provider gets it: its model name, always streamed (the
    idle deadline needs bytes to watch), thinking signatures it may see (E26), tool names it
    accepts. ``strip_thinking`` drops every thinking part (the retry after an Anthropic
    upstream refused a signature). Returns the request, the cases met and the map back from
    shortened tool names."""
    cases: list[str] = []
    names: dict[str, str] = {}
    changes: dict[str, object] = {"stream": True}
    if provider.upstream_model:
        changes["model"] = provider.upstream_model
    request = replace(request, **changes)  # type: ignore[arg-type]
    request = _system.for_upstream(request, provider.api, cases)
    request, ids_changed = _toolids.for_upstream(request, provider.api == "anthropic")
    if ids_changed:
        cases.append("b2_tool_ids_mapped")
    if provider.api == "anthropic":
        if strip_thinking:
            request = _signature.strip_thinking(request)
            cases.append("E26_thinking_stripped_retry")
        request, dropped = _signature.for_anthropic_upstream(request, provider.name)
        if dropped:
            cases.append("E26_foreign_thinking_dropped")
        if (
            (dropped or strip_thinking)
            and request.reasoning is True
            and _signature.tool_turn_unthought(request)
        ):
            # with thinking on, Anthropic wants the tool turn to start with its signed
            # thinking, which is gone: ask without thinking rather than be refused
            request = replace(request, reasoning=False)
            cases.append("E26_thinking_off_for_tool_turn")
    else:
        request = _signature.for_other_upstream(request)
        request, names = shorten(request)
        if names:
            cases.append("tool_names_shortened")
    return request, cases, names


def encode(provider: Provider, request: Request) -> bytes:
    try:
        return encode_request(provider.api, request)
    except UnsupportedRequest as exc:
        raise FrontError(400, f"provider {provider.name!r} ({provider.api}): {exc}") from None
    except (ValueError, TypeError) as exc:
        raise FrontError(400, f"cannot encode the request for {provider.api}: {exc}") from None


def headers(
    provider: Provider, request_id: str, request: Request | None = None, *, stream: bool = True
) -> dict[str, str]:
    out = dict(request_headers(provider.api, provider.api_key(), request_id, stream=stream))
    if provider.api == "anthropic" and request is not None and _system.has_mid_system(request):
        out["anthropic-beta"] = _system.MID_SYSTEM_BETA  # system messages kept in place
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


async def status_failure(response: Http1Response, provider: Provider) -> TurnFailure:
    """A non-2xx upstream answer as a failure; what may succeed elsewhere is the client's
    rule (:func:`solver.wire.retryable_status`)."""
    try:
        body = await response.aread(_ERROR_BODY_LIMIT)
    except Http1Error:
        body = b""
    message = redact(_message_of(body) or response.reason_phrase, [provider.api_key()])
    status = response.status_code
    return TurnFailure(
        kind="rate_limited" if status == 429 else "upstream_status",
        message=f"upstream {provider.name} answered {status}: {message}",
        status=status,
        retryable=retryable_status(status),
        retry_after=_bounded(retry_after_seconds(response.headers.get("retry-after"))),
    )


def _bounded(seconds: float | None) -> float | None:
    """A wait the breaker can honour: an hour or less (a later date is not a cool-down)."""
    return seconds if seconds is not None and seconds <= 3600 else None
