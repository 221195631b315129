"""The streaming model client: deadlines, retries, allow-list, exact bytes, telemetry.

One :meth:`ModelClient.complete` call makes one or more attempts. Each attempt is announced to
the observer before its first byte leaves (:class:`AttemptStart`, with the exact body), streams
the raw response bytes into the observer's sink as they arrive, and is closed with an
:class:`AttemptEnd`. Retries (tenacity: exponential backoff with jitter, ``Retry-After``
honoured) cover connection errors, 408/409/429/5xx, deadlines and retryable stream errors;
never 400/401/403/404 or context-length errors. A call the served context would cap below its
floor (``Request.min_tokens``) is not sent at all: it raises :class:`ContextBelowFloor`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from solver._util.ids import uuid7 as new_request_id
from solver.llm import _policy
from solver.llm._policy import AllowList, host_port, status_error
from solver.llm.gateway import gateway_workers_facts, routed_worker
from solver.llm.probe import (
    custom_logit_processor_enabled,
    estimate_prompt_tokens,
    parse_server_info,
    prompt_tokens_from_error,
)
from solver.wire import (
    PATHS,
    Api,
    AttemptEnd,
    AttemptObserver,
    AttemptStart,
    Completion,
    Connection,
    ContextBelowFloor,
    ContextLengthExceeded,
    Deadlines,
    Endpoint,
    EndpointUnreachable,
    FirstByteTimeout,
    Folder,
    HTTPStatusError,
    IdleTimeout,
    ProbeTimeout,
    ReasoningDelta,
    Request,
    ResponseSink,
    RetryPolicy,
    RouteAnswer,
    ServerInfo,
    StreamDecoder,
    StreamProtocolError,
    TextDelta,
    ToolCallDelta,
    TotalTimeout,
    TransportError,
    Watchdog,
    encode_request,
    one_sampling_knob,
    redact,
    refusal_names_processor,
    request_headers,
    starts_body,
    thinking_budget_blocker,
    with_thinking_budget,
    without_thinking_budget,
)

__all__ = ["ModelClient"]

_DEADLINE_ERRORS = {"first_byte": FirstByteTimeout, "idle": IdleTimeout, "total": TotalTimeout}

# The most bytes one response may send. A 256k-token answer streamed a token an event is
# about 100 MB of SSE; past this the server is broken or hostile, and every byte would be
# stored in the run.
MAX_RESPONSE_BYTES = 512 * 1024 * 1024
# One JSON answer is decoded whole; a 256k-token answer is a few megabytes of it.
MAX_BODY_BYTES = 64 * 1024 * 1024
# Of an error response only this much is kept: enough for any server's message.
ERROR_BODY_LIMIT = 64 * 1024


class ModelClient:
    """Async client for one endpoint; ``async with ModelClient(endpoint) as client``."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        deadlines: Deadlines = Deadlines(),  # noqa: B008 - frozen value
        retry: RetryPolicy = RetryPolicy(),  # noqa: B008 - frozen value
        proxy: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        prompt_tokens: Callable[[Request], Awaitable[int]] | None = None,
        on_connect: Callable[[Connection], None] | None = None,
        on_notice: Callable[[str], None] | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        """``on_connect`` hears of each connection opened by a request that has no observer
        (the endpoint probe), so a run can journal those too: later calls may reuse them.
        ``on_notice`` hears, once, of what the client stopped sending because the server
        refused it (a thinking budget); it may be set after construction. A response longer
        than ``max_response_bytes`` ends its attempt as a retryable ``malformed`` error."""
        self.endpoint = endpoint
        self.max_response_bytes = max_response_bytes
        self.deadlines = deadlines
        self.retry = retry
        self.url = endpoint.url_for(PATHS[endpoint.api])
        self._allowed = host_port(endpoint.base_url)
        self._proxy = proxy
        self._transport = transport
        self._prompt_tokens = prompt_tokens
        self._on_connect = on_connect
        self.on_notice = on_notice
        # why the server refused the thinking-budget fields; set, they are no longer sent
        self.thinking_budget_refused: str | None = None
        self._http: httpx.AsyncClient | None = None
        self._server: ServerInfo | None = None
        self._probed = False
        self._first_probe: asyncio.Task[ServerInfo] | None = None

    async def __aenter__(self) -> ModelClient:
        timeout = httpx.Timeout(connect=self.deadlines.connect, read=None, write=None, pool=None)
        if self._transport is not None:
            inner = self._transport
        else:
            proxy = httpx.Proxy(self._proxy) if self._proxy else None
            inner = httpx.AsyncHTTPTransport(proxy=proxy, retries=0)
        self._http = httpx.AsyncClient(
            transport=AllowList(inner, self._allowed),
            timeout=timeout,
            trust_env=False,  # ambient HTTP(S)_PROXY must not reroute model traffic
            follow_redirects=False,
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._first_probe is not None and not self._first_probe.done():
            self._first_probe.cancel()
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    @property
    def server_info(self) -> ServerInfo | None:
        return self._server

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            raise RuntimeError("ModelClient is not open: use `async with ModelClient(...)`")
        return self._http

    def _headers(self, request_id: str, *, stream: bool) -> dict[str, str]:
        return request_headers(self.endpoint.api, self.endpoint.api_key, request_id, stream=stream)

    def _tracer(
        self, observer: AttemptObserver | None
    ) -> Callable[[str, dict[str, Any]], Awaitable[None]]:
        host, port = host_port(self._proxy) if self._proxy else self._allowed
        dialled: list[str] = []  # the address the connection being opened was asked for

        async def trace(name: str, info: dict[str, Any]) -> None:
            if name == "connection.connect_tcp.started":
                dialled[:] = [_ip_literal_address(info.get("host"), info.get("port"))]
                return
            if name != "connection.connect_tcp.complete":
                return
            report = observer.connection_opened if observer is not None else self._on_connect
            if report is None:
                return
            shown = _peer_address(info.get("return_value"))
            if not shown and dialled:
                # A server that resets the connection at once leaves the socket unable to
                # name its peer; a connect to an IP literal (no DNS) can only have reached it.
                shown = dialled[0]
            report(Connection(host=host, port=port, address=shown))

        return trace

    # ------------------------------------------------------------ probe

    async def probe(self, observer: AttemptObserver | None = None) -> ServerInfo:
        """Ask the server what it serves (``/v1/models``; llama.cpp's ``/props`` when the
        models list has no context length). Bounded: a server that accepts and never answers
        raises :class:`ProbeTimeout` after the connect deadline plus the probe budget."""
        client = self._client()
        url = self.endpoint.url_for("/models")
        headers = self._headers(new_request_id(), stream=False)
        extensions = {"trace": self._tracer(observer)}
        budget = self._probe_budget()
        timeout = httpx.Timeout(
            connect=self.deadlines.connect, read=budget, write=budget, pool=budget
        )
        try:
            # the per-read timeout alone would let a trickling server stretch the probe
            async with asyncio.timeout(self._probe_bound()):
                response = await client.get(
                    url, headers=headers, extensions=extensions, timeout=timeout
                )
                raw = response.content
                if response.status_code >= 400:
                    raise self._status_error(response.status_code, raw, response.headers, None)
                info = parse_server_info(raw, url)
                if info.context_length is None:
                    props_url = self.endpoint.url_for("/props", versioned=False)
                    props = await client.get(
                        props_url, headers=headers, extensions=extensions, timeout=timeout
                    )
                    if props.status_code == 200:
                        extra = parse_server_info(props.content, props_url)
                        info = replace(info, context_length=extra.context_length)
                if info.context_length is None:
                    # smg's models list drops the workers' context lengths; its /workers has them
                    workers_url = self.endpoint.url_for("/workers", versioned=False)
                    listed = await client.get(
                        workers_url, headers=headers, extensions=extensions, timeout=timeout
                    )
                    if listed.status_code == 200:
                        length, runtime = gateway_workers_facts(listed.content, info.models)
                        info = replace(info, context_length=length)
                        if runtime == "sglang" and info.server in (None, "self_hosted"):
                            info = replace(info, server="sglang")
                if info.server == "sglang":
                    # whether it takes a thinking-budget processor (a router has no such page)
                    info_url = self.endpoint.url_for("/server_info", versioned=False)
                    answer = await client.get(
                        info_url, headers=headers, extensions=extensions, timeout=timeout
                    )
                    if answer.status_code == 200:
                        enabled = custom_logit_processor_enabled(answer.content)
                        info = replace(info, custom_logit_processor=enabled)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise EndpointUnreachable(
                self._redact(f"cannot reach {url}: {exc!r}"), url=url
            ) from None
        except (httpx.TimeoutException, TimeoutError):
            raise ProbeTimeout(
                f"server info request got no answer within {budget:g} s ({url})", url=url
            ) from None
        except httpx.TransportError as exc:
            raise EndpointUnreachable(
                self._redact(f"cannot reach {url}: {exc!r}"), url=url
            ) from None
        self._server = info
        self._probed = True
        return info

    async def route_answer(self, api: Api | None = None) -> RouteAnswer:
        """POST an empty JSON object to the protocol's path (``api``: another protocol's, to
        learn which one a server speaks). Nothing is generated: a server that serves the path
        refuses the body (400 or 422), one that does not answers 404 or 405. Bounded as the
        probe is; connect failures raise :class:`EndpointUnreachable`."""
        client = self._client()
        url = self.endpoint.url_for(PATHS[api or self.endpoint.api])
        headers = self._headers(new_request_id(), stream=False)
        budget = self._probe_budget()
        timeout = httpx.Timeout(
            connect=self.deadlines.connect, read=budget, write=budget, pool=budget
        )
        try:
            async with asyncio.timeout(self._probe_bound()):
                response = await client.post(url, headers=headers, content=b"{}", timeout=timeout)
                body = response.content[:ERROR_BODY_LIMIT]
        except (httpx.TimeoutException, TimeoutError):
            raise ProbeTimeout(f"POST {url} got no answer within {budget:g} s", url=url) from None
        except httpx.TransportError as exc:
            raise EndpointUnreachable(
                self._redact(f"cannot reach {url}: {exc!r}"), url=url
            ) from None
        return RouteAnswer(
            url=url,
            status=response.status_code,
            content_type=response.headers.get("content-type", ""),
            body=self._redacted_body(body),
        )

    def _probe_budget(self) -> float:
        """Read budget of one probe request: never longer than the call's own deadlines."""
        limits = self.deadlines
        budget = min(limits.probe, limits.first_byte)
        return budget if limits.total is None else min(budget, limits.total)

    def _probe_bound(self) -> float:
        # connect, then the models request and possibly /props, a gateway's /workers and
        # SGLang's /server_info
        return self.deadlines.connect + 4 * self._probe_budget()

    # ------------------------------------------------------------ complete

    async def complete(self, request: Request, observer: AttemptObserver) -> Completion:
        """Run ``request`` to a :class:`Completion`, retrying per policy; raises a
        :class:`TransportError` subclass when it gives up."""
        if request.max_tokens_setting is None:  # the request's max_tokens is the setting
            request = replace(request, max_tokens_setting=request.max_tokens)
        effective, cap = await self._outgoing(request, observer)
        retrying = _policy.retrying(self.retry, observer.retry_scheduled)
        recapped = False
        async for attempt in retrying:
            with attempt:
                index = attempt.retry_state.attempt_number - 1
                try:
                    return await self._attempt(effective, cap, observer, index)
                except ContextLengthExceeded as exc:
                    info = self._server
                    if not recapped and (info is None or info.context_length is None):
                        # the served context is unknown (the first probe failed): ask again
                        with contextlib.suppress(TransportError):
                            await self.probe(observer)
                    # the server told us the prompt size: cap once more, exactly, if that fits
                    fixed = self._recap(effective, exc) if not recapped else None
                    if fixed is None:
                        raise
                    recapped = True
                    effective, cap = fixed
                    # the budget as configured, fitted once more to the lower cap: the answer
                    # still fits
                    effective = self._thinking(
                        replace(effective, thinking_budget=request.thinking_budget)
                    )
                    exc.retryable = True
                    raise
                except (HTTPStatusError, StreamProtocolError) as exc:
                    if not self._refused_budget(effective, exc):
                        raise
                    # the same request without the fields: bounded by max_tokens alone
                    effective = without_thinking_budget(effective)
                    exc.retryable = True
                    raise
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover

    async def _outgoing(
        self, request: Request, observer: AttemptObserver
    ) -> tuple[Request, int | None]:
        """The request as its first attempt sends it: capped to the served context, one
        sampling knob where the protocol takes one, and the thinking budget in the server's
        fields, fitted to the cap; and the cap (None: not capped)."""
        effective, cap = await self._capped(request, observer)
        effective = one_sampling_knob(self.endpoint.api, effective)
        return self._thinking(effective), cap

    async def _capped(
        self, request: Request, observer: AttemptObserver
    ) -> tuple[Request, int | None]:
        if not self._probed:
            await self._probe_once(observer)
        info = self._server
        if info is None or info.context_length is None:
            return request, None
        if self._prompt_tokens is not None:
            prompt, counted_by = await self._prompt_tokens(request), "counted"
        else:
            prompt, counted_by = estimate_prompt_tokens(request), "estimated"
        # not clamped to 1: a prompt that fills the context leaves no room, and one token of
        # room is no answer either; the floor check below refuses both
        cap = info.context_length - prompt
        if request.max_tokens <= cap:
            return request, None
        self._check_floor(request, prompt, counted_by, info.context_length, cap)
        return replace(request, max_tokens=cap), cap

    def _check_floor(
        self, request: Request, prompt: int, counted_by: str, context_length: int, cap: int
    ) -> None:
        """Raise :class:`ContextBelowFloor` when ``cap``, the context's bound on the call's
        output, is below the call's floor: capped so low it could only be cut off."""
        if cap < max(request.min_tokens, 1):
            raise ContextBelowFloor(
                prompt_tokens=prompt,
                counted_by=counted_by,
                context_length=context_length,
                cap=cap,
                floor=request.min_tokens,
                url=self.url,
            )

    def _thinking(self, request: Request) -> Request:
        """The request with its thinking budget in the server's fields, fitted to its cap,
        or without it where the server does not take them (non-SGLang, no processor flag,
        refused before)."""
        if request.thinking_budget is None:
            return request
        blocked = self.thinking_budget_refused or thinking_budget_blocker(
            self.endpoint.api, self._server
        )
        if blocked is not None:
            return without_thinking_budget(request)
        return with_thinking_budget(request)

    def _refused_budget(self, request: Request, exc: HTTPStatusError | StreamProtocolError) -> bool:
        """Whether ``exc`` is a 400 refusing the thinking-budget fields ``request`` carried;
        if so it is remembered (and told once), so no later call sends them."""
        if request.thinking_budget is None or isinstance(exc, ContextLengthExceeded):
            return False
        if exc.status != 400 or not refusal_names_processor(exc.message):
            return False
        first = self.thinking_budget_refused is None
        self.thinking_budget_refused = (
            f"the server refused the thinking-budget fields ({exc.message[:200]})"
        )
        if first and self.on_notice is not None:
            self.on_notice(
                f"thinking budget not sent: {self.thinking_budget_refused}; "
                "calls are bounded by max_tokens only"
            )
        return True

    async def _probe_once(self, observer: AttemptObserver) -> None:
        """Concurrent calls share one probe. A failed probe means no capping for this call
        (the request itself will tell if it does not fit)."""
        if self._first_probe is None:
            self._first_probe = asyncio.ensure_future(self.probe(observer))
        probe = self._first_probe
        with contextlib.suppress(TransportError, TimeoutError):
            # the probe bounds itself; this bound only guards the wait
            await asyncio.wait_for(asyncio.shield(probe), self._probe_bound() + 1.0)
        if probe.done() and self._first_probe is probe and not self._probed:
            error = None if probe.cancelled() else probe.exception()
            if isinstance(error, TransportError) and not error.retryable:
                self._probed = True  # the server answered "no": asking again will not help
            else:
                self._first_probe = None  # a timeout or lost connection may pass: ask next call

    def _recap(self, request: Request, exc: ContextLengthExceeded) -> tuple[Request, int] | None:
        info = self._server
        prompt = prompt_tokens_from_error(exc.body_excerpt)
        if info is None or info.context_length is None or prompt is None:
            return None
        cap = info.context_length - prompt
        if cap < 1 or cap >= request.max_tokens:
            return None
        self._check_floor(request, prompt, "as the server counted", info.context_length, cap)
        return replace(request, max_tokens=cap), cap

    def _redacted_body(self, body: bytes) -> bytes:
        text = body.decode("utf-8", "surrogateescape")
        masked = self._redact(text)
        return body if masked == text else masked.encode("utf-8", "surrogateescape")

    def _redact(self, text: str) -> str:
        return redact(text, self.endpoint.api_key)

    def _status_error(
        self, status: int, body: bytes, headers: httpx.Headers, request_id: str | None
    ) -> HTTPStatusError:
        return status_error(
            status, body, headers, url=self.url, request_id=request_id, secret=self.endpoint.api_key
        )

    async def _attempt(
        self, request: Request, cap: int | None, observer: AttemptObserver, retry_index: int
    ) -> Completion:
        client = self._client()
        request_id = new_request_id()
        body = encode_request(self.endpoint.api, request)
        start = AttemptStart(
            call_attempt=retry_index + 1,
            request_id=request_id,
            url=self.url,
            request=request,
            body=body,
            max_tokens_cap=cap,
        )
        sink = observer.attempt_started(start)
        state = _AttemptState(
            request=request,
            request_id=request_id,
            observer=observer,
            sink=sink,
            watchdog=Watchdog(self.deadlines),
            folder=Folder(reasoning=request.reasoning),
            decoder=StreamDecoder(self.endpoint.api, reasoning=request.reasoning),
        )
        http_request = client.build_request(
            "POST",
            self.url,
            content=body,
            headers=self._headers(request_id, stream=request.stream),
            extensions={"trace": self._tracer(observer)},
        )
        try:
            try:
                await self._exchange(client, http_request, state)
            except asyncio.CancelledError:
                if (which := state.watchdog.claim()) is None:
                    raise
                raise self._deadline_error(which, request_id) from None
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                raise EndpointUnreachable(
                    self._redact(f"cannot connect to {self.url}: {exc!r}"),
                    request_id=request_id,
                    url=self.url,
                ) from None
            except httpx.TransportError as exc:
                lost = "before the response" if state.status is None else "mid-stream"
                raise StreamProtocolError(
                    self._redact(f"connection lost {lost} ({self.url}): {exc!r}"),
                    kind="connection_lost",
                    retryable=True,
                    request_id=request_id,
                    url=self.url,
                ) from None
            error = state.folder.error
            if error is not None:
                raise StreamProtocolError(
                    self._redact(f"{error.kind}: {error.message} ({self.url})"),
                    kind=error.kind,
                    retryable=error.retryable,
                    status=error.status,
                    request_id=request_id,
                    url=self.url,
                )
            return state.folder.completion()
        except TransportError as exc:
            state.failure = exc
            raise
        except BaseException as exc:
            state.local_failure = (
                "cancelled" if isinstance(exc, asyncio.CancelledError) else "local"
            )
            state.local_message = self._redact(repr(exc))
            raise
        finally:
            state.watchdog.stop()
            observer.attempt_ended(start, state.end(retry_index))

    async def _exchange(
        self, client: httpx.AsyncClient, http_request: httpx.Request, state: _AttemptState
    ) -> None:
        """Send the request and fold the whole response into ``state``; an error status raises
        :class:`HTTPStatusError` once its (redacted) body is stored."""
        response = await client.send(http_request, stream=True)
        # headers alone do not end the first-byte phase: vLLM sends them before the
        # prefill, SGLang only with the first token; the first body byte ends it
        state.headers_at = state.elapsed()
        try:
            status = state.status = response.status_code
            # a proxy or server that only echoes our X-Request-ID tells nothing new
            header_id = response.headers.get("x-request-id") or response.headers.get("request-id")
            state.server_id = header_id if header_id != state.request_id else None
            state.routed_worker = routed_worker(response.headers)
            held, decided = await self._read(state, response)
        finally:
            await response.aclose()
        if status >= 400:
            # a server may echo the key it refused, whole or cut short: the stored
            # body has every fragment of it masked (bytes unchanged when none is)
            state.store(self._redacted_body(b"".join(held or [])))
            raise self._status_error(
                status, b"".join(held or []), response.headers, state.request_id
            )
        decoder = state.decoder
        if state.oversized is not None:
            what = "JSON body" if held else "response"
            tail = decoder.too_large(f"the {what} ran past {state.oversized} bytes")
        elif held is not None and (decided or not state.request.stream):
            tail = decoder.body(b"".join(held))
            if state.ttft is None:
                state.ttft = state.elapsed()
        else:
            if held:  # only whitespace came: a stream that never started
                decoder.feed(b"".join(held))
            tail = decoder.close()
        for event in tail:
            state.folder.add(event)
            state.observer.on_event(event)

    async def _read(
        self, state: _AttemptState, response: httpx.Response
    ) -> tuple[list[bytes] | None, bool]:
        """Read the response body under the watchdog, decoding a stream as it comes.

        Returns the bytes held back (None once they were fed to the stream decoder) and whether
        body-or-stream is decided. Body or stream is told by the first byte, never by the
        content-type, the way decode_stream/decode_body tell it offline (E20); an error body
        is only held, and stored once it is redacted."""
        status = response.status_code
        watchdog, decoder, loop = state.watchdog, state.decoder, state.loop
        decided = status >= 400
        held: list[bytes] | None = []
        held_bytes = 0
        try:
            async for data in response.aiter_raw():
                if watchdog.last is None:
                    watchdog.body_started()
                    state.ttfb = state.elapsed()
                watchdog.last = loop.time()
                if status < 400:
                    state.store(data)
                    if state.size > self.max_response_bytes:
                        state.oversized = self.max_response_bytes
                        break
                if held is not None:
                    held.append(data)
                    held_bytes += len(data)
                    if status >= 400 and held_bytes > ERROR_BODY_LIMIT:
                        break  # the message is at its start; the rest is not read
                    if held_bytes > MAX_BODY_BYTES:
                        state.oversized = MAX_BODY_BYTES  # a body, or no first byte yet
                        break
                    if decided:
                        continue
                    body_first = starts_body(data)
                    if body_first is None:
                        continue
                    decided = True
                    if body_first:
                        continue
                    data, held = b"".join(held), None
                events = decoder.feed(data)
                if events:
                    for event in events:
                        if state.ttft is None and isinstance(
                            event, TextDelta | ReasoningDelta | ToolCallDelta
                        ):
                            state.ttft = state.elapsed()
                        state.folder.add(event)
                        state.observer.on_event(event)
                    if decoder.finished:
                        break
                    if decoder.finish_pending:
                        watchdog.finish_seen(self.deadlines.finish_grace)
        except asyncio.CancelledError:
            # after a finish only the usage tail was due: silence past the grace
            # ends the stream as a success (E06), it does not discard the answer
            if watchdog.fired != "grace" or watchdog.claim() is None:
                raise
        return held, decided

    def _deadline_error(self, which: str, request_id: str) -> TransportError:
        limit = {
            "first_byte": self.deadlines.first_byte,
            "idle": self.deadlines.idle,
            "total": self.deadlines.total,
        }[which]
        return _DEADLINE_ERRORS[which](
            f"{which.replace('_', ' ')} deadline of {limit:g} s passed ({self.url})",
            request_id=request_id,
            url=self.url,
        )


@dataclass(slots=True, kw_only=True)
class _AttemptState:
    """One attempt's inputs and what it has state so far: whichever way the attempt ends, its
    :class:`AttemptEnd` is built from this."""

    request: Request
    request_id: str
    observer: AttemptObserver
    sink: ResponseSink
    watchdog: Watchdog
    folder: Folder
    decoder: StreamDecoder
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    hasher: hashlib._Hash = field(default_factory=hashlib.sha256)
    size: int = 0
    oversized: int | None = None  # the byte limit the response ran past
    status: int | None = None
    server_id: str | None = None
    routed_worker: str | None = None
    headers_at: float | None = None
    ttfb: float | None = None
    ttft: float | None = None
    failure: TransportError | None = None
    local_failure: str | None = None
    local_message: str | None = None

    def elapsed(self) -> float:
        return self.loop.time() - self.watchdog.started

    def store(self, data: bytes) -> None:
        """Keep response bytes: the sink gets them, the hash and size count them."""
        self.sink.write(data)
        self.hasher.update(data)
        self.size += len(data)

    def end(self, retry_index: int) -> AttemptEnd:
        total = self.elapsed()
        usage = self.folder.usage
        speed = None
        if self.ttft is not None and usage.output_tokens and total > self.ttft:
            speed = usage.output_tokens / (total - self.ttft)
        finish = self.folder.finish.reason if self.folder.finish is not None else None
        failure = self.failure
        return AttemptEnd(
            request_id=self.request_id,
            server_request_id=self.decoder.server_id or self.server_id,
            routed_worker=self.routed_worker,
            status=self.status,
            ttfb_s=self.ttfb if self.ttfb is not None else self.headers_at,
            headers_s=self.headers_at,
            ttft_s=self.ttft,
            total_s=total,
            usage=usage,
            output_tokens_per_s=speed,
            finish_reason=finish,
            retry_index=retry_index,
            error_kind=failure.kind if failure is not None else self.local_failure,
            error_message=failure.message if failure is not None else self.local_message,
            retryable=failure.retryable if failure is not None else False,
            normalised_cases=tuple(sorted(self.decoder.cases)),
            response_sha256=self.hasher.hexdigest(),
            response_bytes=self.size,
        )


def _peer_address(stream: Any) -> str:
    """``host:port`` of the peer a new connection reached, as its socket reports it; empty
    when the socket cannot say (it was reset before it was asked)."""
    try:
        address = stream.get_extra_info("server_addr") if stream is not None else None
    except OSError:
        address = None
    return f"{address[0]}:{address[1]}" if address else ""


def _ip_literal_address(host: object, port: object) -> str:
    """``host:port`` when ``host`` is an IP address (not a name DNS could resolve anywhere),
    else empty."""
    if not isinstance(host, str) or not isinstance(port, int):
        return ""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return ""
    return f"{host}:{port}"
