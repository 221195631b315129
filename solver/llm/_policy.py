"""Retry and network policy of the client: what is retried, how long to wait, where to go."""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import urlsplit

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
    wait_random,
)
from tenacity.stop import stop_base

from solver.wire import (
    ContextLengthExceeded,
    HostNotAllowed,
    HTTPStatusError,
    RetryNotice,
    RetryPolicy,
    TransportError,
    redact,
    retry_after_seconds,
    retryable_status,
)

__all__ = ["AllowList", "Wait", "host_port", "retry_after_seconds", "retrying", "status_error"]

_CONTEXT_ERROR = re.compile(
    r"context.length|maximum context|context size|context window|too many tokens|"
    r"exceed_context|prompt is too long",
    re.IGNORECASE,
)
_EXCERPT = 2000


def host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    default = 443 if parts.scheme == "https" else 80
    return (parts.hostname or "").lower(), parts.port or default


class AllowList(httpx.AsyncBaseTransport):
    """Refuses any request to a host:port other than the endpoint's, before it is sent."""

    def __init__(self, inner: httpx.AsyncBaseTransport, allowed: tuple[str, int]) -> None:
        self._inner = inner
        self._allowed = allowed

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        port = url.port or (443 if url.scheme == "https" else 80)
        if (url.host.lower(), port) != self._allowed:
            raise HostNotAllowed(
                f"refusing {url.host}:{port}: only {self._allowed[0]}:{self._allowed[1]} is allowed"
            )
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


class Wait:
    """Backoff with jitter, or the server's Retry-After (capped at ``max_wait``)."""

    def __init__(self, policy: RetryPolicy) -> None:
        # exponential from initial_wait, plus up to initial_wait of jitter
        self._backoff = wait_exponential(multiplier=policy.initial_wait, max=policy.max_wait)
        self._jitter = wait_random(0, policy.initial_wait)
        self._max = policy.max_wait

    def __call__(self, state: RetryCallState) -> float:
        outcome = state.outcome
        error = outcome.exception() if outcome is not None else None
        if isinstance(error, HTTPStatusError) and error.retry_after is not None:
            return min(error.retry_after, self._max)
        return min(float(self._backoff(state) + self._jitter(state)), self._max)


def status_error(
    status: int,
    body: bytes,
    headers: httpx.Headers,
    *,
    url: str,
    request_id: str | None,
    secret: str | None,
) -> HTTPStatusError:
    """The error for a non-2xx answer: context-length errors are their own final type;
    408/409/425/429 and every 5xx but 501 are retryable, everything else is final."""
    excerpt = redact(body[:_EXCERPT].decode("utf-8", "replace"), secret)
    message = f"HTTP {status} from {url}: {excerpt[:300]}"
    if status in (400, 413, 422) and _CONTEXT_ERROR.search(excerpt):
        return ContextLengthExceeded(
            message, status=status, body_excerpt=excerpt, request_id=request_id, url=url
        )
    return HTTPStatusError(
        message,
        status=status,
        body_excerpt=excerpt,
        retry_after=retry_after_seconds(headers.get("retry-after")),
        retryable=retryable_status(status),
        request_id=request_id,
        url=url,
    )


def retrying(
    policy: RetryPolicy, on_retry: Callable[[RetryNotice], None] | None = None
) -> AsyncRetrying:
    """Tenacity loop for one call: retry what says it is retryable, within the policy.
    ``on_retry`` hears of each retry before its wait: what failed, and when it is tried again."""
    stop: stop_base = stop_after_attempt(policy.max_attempts)
    if policy.give_up_after is not None:
        stop = stop | stop_after_delay(policy.give_up_after)

    def before_sleep(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        if on_retry is None or not isinstance(error, TransportError):
            return
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        on_retry(
            RetryNotice(
                failed_attempt=state.attempt_number,
                max_attempts=policy.max_attempts,
                wait_s=float(wait),
                error_kind=error.kind,
                message=error.message[:300],
            )
        )

    return AsyncRetrying(
        stop=stop,
        wait=Wait(policy),
        retry=retry_if_exception(lambda e: isinstance(e, TransportError) and e.retryable),
        before_sleep=before_sleep,
        reraise=True,
    )
