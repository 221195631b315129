"""The ASGI application: routes, authentication, and the small endpoints around the bridge.

Routes: ``POST /v1/messages`` (Anthropic), ``POST /v1/messages/count_tokens``,
``POST /v1/responses`` (OpenAI Responses), ``POST /v1/chat/completions`` (OpenAI Chat),
``GET /v1/models``, ``GET /health``, ``GET /metrics`` (Prometheus), ``GET|POST /admin/active``
(which provider serves; loopback clients, or any client with the proxy's token).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
from starlette.applications import Starlette
from starlette.requests import Request as HTTPRequest
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from solver.errors import ProxyConfigError
from solver.wire import encode_request

from ._config import ProxyConfig, is_loopback
from ._exchange import Exchange, started_at
from ._fronts import ANTHROPIC, CHAT, RESPONSES, Front
from ._parse import MAX_BODY_BYTES, FrontError
from ._state import ProxyState
from ._telemetry import RequestRecord
from ._upstream import headers as upstream_headers
from ._upstream import upstream_request
from ._wire import dumps, uuid7
from .fronts.anthropic import parse_messages


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _authorized(state: ProxyState, headers: dict[str, str]) -> bool:
    token = state.config.token
    if not token:
        return True
    offered = headers.get("x-api-key", "")
    bearer = headers.get("authorization", "")
    if bearer.lower().startswith("bearer "):
        offered = offered or bearer[7:].strip()
    return hmac.compare_digest(offered.encode(), token.encode())


def _known(state: ProxyState, record: RequestRecord, body: bytes | None) -> None:
    """What a refused request's row can still say: the model it named, if the body is a JSON
    object with one, and the provider that would have served it."""
    if not body:
        return
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return
    model = obj.get("model") if isinstance(obj, dict) else None
    if not isinstance(model, str) or not model:
        return
    record.model = model[:200]
    providers = state.route(record.model)
    if providers:
        record.provider = providers[0].name


def _correlation_id(headers: dict[str, str]) -> str:
    given = headers.get("x-request-id", "")
    if 0 < len(given) <= 128 and given.isascii() and given.isprintable():
        return given
    return uuid7()


MAX_ADMIN_BODY_BYTES = 4096


async def _read_body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise FrontError(413, f"request body is larger than {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _send_json(send: Send, status: int, body: Any, extra: list[tuple[bytes, bytes]]) -> None:
    headers = [(b"content-type", b"application/json"), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": dumps(body).encode()})


class BridgeEndpoint:
    """One front protocol's endpoint (raw ASGI, so streaming pays for no response wrapper)."""

    def __init__(self, state: ProxyState, front: Front) -> None:
        self.state = state
        self.front = front

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state, front = self.state, self.front
        headers = _headers(scope)
        record = RequestRecord(
            request_id=_correlation_id(headers),
            client_request_id=headers.get("x-client-request-id", "")[:200],
            client_protocol=front.name,
            started_at=started_at(),
        )
        extra = [(b"x-request-id", record.request_id.encode())]
        if not _authorized(state, headers):
            await _send_json(
                send, 401, front.error_body(401, "missing or wrong proxy token"), extra
            )
            return
        body: bytes | None = None
        try:
            body = await _read_body(receive)
            if body is None:
                return
            fr = front.parse(body, headers)
        except FrontError as exc:
            await _send_json(send, exc.status, front.error_body(exc.status, exc.message), extra)
            record.status, record.http_status, record.error = "bad_request", exc.status, exc.message
            _known(state, record, body)
            state.metrics.requests[(front.name, record.provider, "bad_request")] += 1
            state.record(record)
            return
        record.model = fr.client_model
        record.session_id = fr.session_id
        record.stream = fr.stream
        if state.config.store_bodies:
            record.request_body = body
        providers = state.route(fr.client_model)
        if not providers:
            message = f"no provider serves model {fr.client_model!r}"
            await _send_json(send, 404, front.error_body(404, message), extra)
            record.status, record.http_status, record.error = "no_route", 404, message
            state.metrics.requests[(front.name, "", "no_route")] += 1
            state.record(record)
            return
        state.metrics.in_flight += 1
        try:
            await Exchange(state, front, fr, send, receive, record, extra).run(providers)
        finally:
            state.metrics.in_flight -= 1


class CountTokensEndpoint:
    """``/v1/messages/count_tokens``: asks the provider (SGLang answers it exactly through the
    served chat template); when it cannot, an estimate (4 bytes a token), labelled as such in
    the ``x-token-count`` header. Like every request it echoes ``x-request-id`` and gets a
    telemetry row (client protocol ``anthropic_count_tokens``, no tokens: nothing was used)."""

    def __init__(self, state: ProxyState) -> None:
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = self.state
        headers = _headers(scope)
        record = RequestRecord(
            request_id=_correlation_id(headers),
            client_request_id=headers.get("x-client-request-id", "")[:200],
            client_protocol="anthropic_count_tokens",
            started_at=started_at(),
        )
        extra = [(b"x-request-id", record.request_id.encode())]
        started = time.monotonic()

        async def answer(status: int, body: Any, more: list[tuple[bytes, bytes]]) -> None:
            await _send_json(send, status, body, [*extra, *more])
            record.http_status = status
            record.duration_ms = (time.monotonic() - started) * 1000
            if status >= 400:
                record.status = "no_route" if status == 404 else "bad_request"
                record.error = str(body.get("error", {}).get("message", ""))[:300]
            state.record(record)

        if not _authorized(state, headers):  # not recorded, like the other routes
            await _send_json(send, 401, ANTHROPIC.error_body(401, "missing or wrong token"), extra)
            return
        body: bytes | None = None
        try:
            body = await _read_body(receive)
            if body is None:
                return
            fr = parse_messages(body, headers, counting=True)
        except FrontError as exc:
            _known(state, record, body)
            await answer(exc.status, ANTHROPIC.error_body(exc.status, exc.message), [])
            return
        record.model, record.session_id = fr.client_model, fr.session_id
        providers = state.route(fr.client_model)
        if not providers:
            message = f"no provider serves model {fr.client_model!r}"
            await answer(404, ANTHROPIC.error_body(404, message), [])
            return
        provider = providers[0]
        record.provider = provider.name
        request, _, _ = upstream_request(fr.request, provider)
        try:
            payload = orjson.loads(encode_request("anthropic", request))
        except (ValueError, TypeError) as exc:
            await answer(400, ANTHROPIC.error_body(400, str(exc)), [])
            return
        for key in ("max_tokens", "stream", "temperature", "top_p", "stop_sequences"):
            payload.pop(key, None)
        counted = await self._ask(provider, payload) if provider.api != "responses" else None
        source = b"upstream"
        if counted is None:
            counted, source = max(1, len(dumps(payload)) // 4), b"estimate"
        # the count is not consumption: it stays out of the token columns
        record.cases = "count_tokens_estimate" if source == b"estimate" else ""
        await answer(200, {"input_tokens": counted}, [(b"x-token-count", source)])

    async def _ask(self, provider: Any, payload: dict[str, Any]) -> int | None:
        assert self.state.clients is not None
        client = self.state.clients.side
        try:
            response = await client.post(
                provider.url("/messages/count_tokens"),
                content=orjson.dumps(payload),
                headers=upstream_headers(provider, uuid7()),
                timeout=10.0,
            )
        except httpx.HTTPError:
            return None
        if response.status_code != 200:
            return None
        try:
            value = response.json().get("input_tokens")
        except ValueError:
            return None
        return value if isinstance(value, int) and value >= 0 else None


def build_app(config: ProxyConfig) -> Starlette:
    """The proxy as an ASGI app; its :class:`ProxyState` is ``app.state.proxy``."""
    state = ProxyState(config)

    async def health(request: HTTPRequest) -> Response:
        return JSONResponse({"status": "ok", "active_provider": state.active})

    async def metrics(request: HTTPRequest) -> Response:
        if not _authorized(state, dict(request.headers)):
            return PlainTextResponse("missing or wrong proxy token\n", status_code=401)
        return PlainTextResponse(
            state.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8"
        )

    async def models(request: HTTPRequest) -> Response:
        headers = dict(request.headers)
        if not _authorized(state, headers):
            return JSONResponse(CHAT.error_body(401, "missing or wrong proxy token"), 401)
        names: list[str] = []
        providers = sorted(state.config.providers, key=lambda p: p.name != state.active)
        for provider in providers:
            for name in (*provider.models, provider.upstream_model):
                if name and not any(c in name for c in "*?[") and name not in names:
                    names.append(name)
        if "anthropic-version" in headers:
            data: list[dict[str, Any]] = [
                {"type": "model", "id": n, "display_name": n, "created_at": "1970-01-01T00:00:00Z"}
                for n in names
            ]
            first, last = (names[0], names[-1]) if names else (None, None)
            return JSONResponse(
                {"data": data, "has_more": False, "first_id": first, "last_id": last}
            )
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "proxy"} for n in names]
        return JSONResponse({"object": "list", "data": data})

    async def admin_active(request: HTTPRequest) -> Response:
        client = request.client
        loopback = client is not None and is_loopback(client.host)
        if not loopback and not state.config.token:
            # with no token anyone who can reach the port could switch: loopback only
            message = "admin is for loopback clients, or clients with the proxy token"
            return JSONResponse({"error": message}, 403)
        if not _authorized(state, dict(request.headers)):
            return JSONResponse({"error": "missing or wrong proxy token"}, 401)
        if request.method == "POST":
            body = bytearray()
            async for chunk in request.stream():  # bounded: {"provider": NAME} is tiny
                body += chunk
                if len(body) > MAX_ADMIN_BODY_BYTES:
                    message = f"admin body is larger than {MAX_ADMIN_BODY_BYTES} bytes"
                    return JSONResponse({"error": message}, 413)
            try:
                name = json.loads(body)["provider"]
                if not isinstance(name, str):
                    raise TypeError
            except (ValueError, KeyError, TypeError, IndexError, RecursionError):
                return JSONResponse({"error": 'body must be {"provider": NAME}'}, 400)
            try:
                state.config.provider(name)
            except ProxyConfigError as exc:
                return JSONResponse({"error": str(exc)}, 404)
            try:
                state.use(name)  # live at once; saved next to the config file, if any
            except ProxyConfigError as exc:
                return JSONResponse({"error": str(exc)}, 500)
        return JSONResponse(
            {"active": state.active, "providers": [p.name for p in state.config.providers]}
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await state.open()
        try:
            yield
        finally:
            await state.close()

    routes = [
        Route("/v1/messages", BridgeEndpoint(state, ANTHROPIC), methods=["POST"]),
        Route("/v1/messages/count_tokens", CountTokensEndpoint(state), methods=["POST"]),
        Route("/v1/chat/completions", BridgeEndpoint(state, CHAT), methods=["POST"]),
        Route("/v1/responses", BridgeEndpoint(state, RESPONSES), methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/admin/active", admin_active, methods=["GET", "POST"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.proxy = state
    return app
