"""Values the client takes and reports: endpoint, deadlines, retry policy, attempt records."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

from solver.wire.events import Api, FinishReason, Request, StreamEvent, Usage

__all__ = [
    "AttemptEnd",
    "AttemptObserver",
    "AttemptStart",
    "Connection",
    "Deadlines",
    "Endpoint",
    "ResponseSink",
    "RetryNotice",
    "RetryPolicy",
    "RouteAnswer",
    "ServerInfo",
]

_VERSIONED = re.compile(r"/v\d+$")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where the model is served. ``base_url`` may end in a version segment (``/v1``,
    ``/api/paas/v4``); without one, ``/v1`` is added. The key never shows in ``repr``."""

    base_url: str
    api: Api
    model: str
    api_key: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        key = "***" if self.api_key else None
        return (
            f"Endpoint(base_url={self.base_url!r}, api={self.api!r}, model={self.model!r}, "
            f"api_key={key!r})"
        )

    @property
    def api_root(self) -> str:
        """The base URL with its version segment, no trailing slash, without its query."""
        parts = urlsplit(self.base_url)
        root = urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")).rstrip("/")
        return root if _VERSIONED.search(root) else root + "/v1"

    def url_for(self, path: str, *, versioned: bool = True) -> str:
        """``path`` under the API root (or, ``versioned=False``, the root without ``/v1``),
        with the base URL's query kept at the end: ``…/v1?x=1`` + ``/models`` is
        ``…/v1/models?x=1``, not ``…/v1?x=1/models``."""
        root = self.api_root if versioned else self.api_root.removesuffix("/v1")
        query = urlsplit(self.base_url).query
        return root + path + (f"?{query}" if query else "")


@dataclass(frozen=True, slots=True)
class Deadlines:
    """Seconds. ``first_byte`` covers everything until the first response byte, headers
    included: SGLang sends nothing until the first token, so it must outlast the prefill of
    the longest prompt. ``idle`` is the longest silence after that; ``total`` bounds one
    attempt. ``probe`` bounds each server-info request (``/v1/models``, ``/props``), which
    answer at once on a healthy server. ``finish_grace`` is how long to wait after a finish
    reason for the usage tail and the end of the stream before ending it as a success."""

    connect: float = 10.0
    first_byte: float = 1800.0
    idle: float = 600.0
    total: float | None = None
    probe: float = 10.0
    finish_grace: float = 30.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with jitter between ``initial_wait`` and ``max_wait`` seconds;
    ``Retry-After`` is honoured up to ``max_wait``. ``give_up_after`` bounds the whole call."""

    max_attempts: int = 6
    initial_wait: float = 1.0
    max_wait: float = 120.0
    give_up_after: float | None = None


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What the probe learnt. ``server`` is the ``owned_by`` of the models list (``sglang``,
    ``vllm``, ``llamacpp``; None when it names none); ``custom_logit_processor`` is SGLang's
    ``enable_custom_logit_processor`` from ``/server_info`` (None: not asked, or not told)."""

    models: tuple[str, ...]
    context_length: int | None
    raw: bytes
    url: str
    server: str | None = None
    custom_logit_processor: bool | None = None


@dataclass(frozen=True, slots=True)
class RetryNotice:
    """A call's attempt failed and will be tried again in ``wait_s`` seconds: attempt
    ``failed_attempt + 1`` of ``max_attempts`` comes next."""

    failed_attempt: int
    max_attempts: int
    wait_s: float
    error_kind: str
    message: str


@dataclass(frozen=True, slots=True)
class RouteAnswer:
    """How a server answered an empty request on a protocol's path (see
    :meth:`ModelClient.route_answer`); ``body`` is at most 64 KiB of it, keys redacted."""

    url: str
    status: int
    content_type: str
    body: bytes


@dataclass(frozen=True, slots=True)
class AttemptStart:
    """One attempt, before any byte of it leaves. ``request`` is the effective request (after
    capping ``max_tokens``); ``body`` is exactly the bytes sent."""

    call_attempt: int
    request_id: str
    url: str
    request: Request
    body: bytes
    max_tokens_cap: int | None


@dataclass(frozen=True, slots=True)
class Connection:
    host: str
    port: int
    address: str


@dataclass(frozen=True, slots=True)
class AttemptEnd:
    """How one attempt went. Times are seconds from the attempt's start; ``usage`` follows
    the canonical semantics of :class:`Usage` whatever the protocol."""

    request_id: str
    server_request_id: str | None
    status: int | None
    ttfb_s: float | None
    ttft_s: float | None
    total_s: float
    usage: Usage
    output_tokens_per_s: float | None
    finish_reason: FinishReason | None
    retry_index: int
    error_kind: str | None
    error_message: str | None
    retryable: bool
    normalised_cases: tuple[str, ...]
    response_sha256: str = ""
    response_bytes: int = 0
    headers_s: float | None = None  # the response headers; ``ttfb_s`` is the first body byte
    # the worker a gateway says it sent the request to (smg's ``x-smg-routed-worker-id``)
    routed_worker: str | None = None


class ResponseSink(Protocol):
    def write(self, data: bytes, /) -> object: ...


class AttemptObserver(Protocol):
    def attempt_started(self, start: AttemptStart) -> ResponseSink:
        """Called before the request leaves (journal it here, write-ahead); returns where the
        raw response bytes go as they arrive."""
        ...

    def attempt_ended(self, start: AttemptStart, end: AttemptEnd) -> None: ...

    def connection_opened(self, conn: Connection) -> None: ...

    def on_event(self, event: StreamEvent) -> None:
        """Each canonical event as decoded (live progress); keep it cheap."""
        ...

    def retry_scheduled(self, notice: RetryNotice) -> None:
        """An attempt failed and the call will try again after ``notice.wait_s`` (live
        progress; the attempt itself was reported by :meth:`attempt_ended`)."""
        ...
