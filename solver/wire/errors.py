"""The transport's exception tree. Every error says whether asking again may help.

::

    TransportError                       base; .retryable, .request_id, .url
    ├── EndpointUnreachable              connect failures and resets (after retries)
    ├── HTTPStatusError                  a non-2xx answer; .status, .body_excerpt, .retry_after
    │   └── ContextLengthExceeded        the prompt (plus max_tokens) does not fit; never retried
    ├── ContextBelowFloor                the prompt leaves less output room than the call's
    │                                    floor (``Request.min_tokens``); never sent, never retried
    ├── DeadlineExceeded                 a deadline of :class:`Deadlines` passed
    │   ├── FirstByteTimeout             no byte (not even headers) within ``first_byte``
    │   ├── IdleTimeout                  no byte for ``idle`` seconds after the first one
    │   ├── TotalTimeout                 the whole attempt exceeded ``total``
    │   └── ProbeTimeout                 a server-info request outlasted ``probe``
    ├── StreamProtocolError              EOF without finish, malformed stream, error in a 200
    │                                    stream, server abort; .kind names which
    ├── HostNotAllowed                   a request or connection outside the allow-list
    └── UnsupportedRequest               the request uses a feature the protocol cannot carry

Messages never contain API keys: :func:`solver.wire.upstream.redact` is applied to every text
that came from the network before it is put into an error. The tree joins the project's
(:mod:`solver.errors`): ``TransportError`` is a ``SolverError`` and ``EndpointUnreachable`` an
``EndpointUnavailable``.
"""

from __future__ import annotations

from solver.errors import EndpointUnavailable, SolverError
from solver.wire.upstream import redact

__all__ = [
    "ContextBelowFloor",
    "ContextLengthExceeded",
    "DeadlineExceeded",
    "EndpointUnreachable",
    "FirstByteTimeout",
    "HTTPStatusError",
    "HostNotAllowed",
    "IdleTimeout",
    "ProbeTimeout",
    "StreamProtocolError",
    "TotalTimeout",
    "TransportError",
    "UnsupportedRequest",
    "redact",
]


class TransportError(SolverError):
    """Base of every error the model transport raises (:mod:`solver.llm`, the codecs)."""

    retryable: bool = False
    kind: str = "transport"

    def __init__(
        self,
        message: str,
        *,
        retryable: bool | None = None,
        request_id: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if retryable is not None:
            self.retryable = retryable
        self.request_id = request_id
        self.url = url


class EndpointUnreachable(TransportError, EndpointUnavailable):
    retryable = True
    kind = "connect"


class HTTPStatusError(TransportError):
    kind = "http_status"

    def __init__(
        self,
        message: str,
        *,
        status: int,
        body_excerpt: str = "",
        retry_after: float | None = None,
        retryable: bool | None = None,
        request_id: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(message, retryable=retryable, request_id=request_id, url=url)
        self.status = status
        self.body_excerpt = body_excerpt
        self.retry_after = retry_after


class ContextLengthExceeded(HTTPStatusError):
    retryable = False
    kind = "context_length"


class ContextBelowFloor(TransportError):
    """The served context leaves the call fewer output tokens than its floor: capped to fit,
    it could only be cut off, so it is not sent. ``prompt_tokens`` is the count the cap was
    computed from (``counted_by``: the client's counter, its estimate, or the server's error);
    ``cap`` is the ``max_tokens`` the call would have been sent with."""

    retryable = False
    kind = "context_below_floor"

    def __init__(
        self,
        *,
        prompt_tokens: int,
        counted_by: str,
        context_length: int,
        cap: int,
        floor: int,
        url: str | None = None,
    ) -> None:
        message = (
            f"not sent: a prompt of {prompt_tokens} tokens ({counted_by}) in a context of "
            f"{context_length} tokens leaves a cap of {max(cap, 0)} output tokens, below the "
            f"call's floor of {floor} (min_tokens)"
        )
        super().__init__(message, url=url)
        self.prompt_tokens = prompt_tokens
        self.context_length = context_length
        self.cap = cap
        self.floor = floor


class DeadlineExceeded(TransportError):
    retryable = True
    kind = "deadline"


class FirstByteTimeout(DeadlineExceeded):
    kind = "first_byte_timeout"


class IdleTimeout(DeadlineExceeded):
    kind = "idle_timeout"


class TotalTimeout(DeadlineExceeded):
    # the same request would hit the same total deadline again
    retryable = False
    kind = "total_timeout"


class ProbeTimeout(DeadlineExceeded):
    kind = "probe_timeout"


class StreamProtocolError(TransportError):
    """The stream ended badly. ``kind`` is the canonical :class:`StreamError` kind."""

    kind = "stream"

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        retryable: bool = False,
        status: int | None = None,
        request_id: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(message, retryable=retryable, request_id=request_id, url=url)
        self.kind = kind
        self.status = status


class HostNotAllowed(TransportError):
    kind = "host_not_allowed"


class UnsupportedRequest(TransportError, ValueError):
    kind = "unsupported_request"
