"""What every upstream caller of a model endpoint shares: the request headers, which statuses
may succeed if asked again, ``Retry-After``, and the redaction of keys from upstream text.

The model client and the proxy both build on these, so the two never disagree on what is
retried or on what an upstream may echo back."""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import UTC
from email.utils import parsedate_to_datetime

from solver._util.masking import mask_urls_in
from solver._util.masking import redact as redact_fragments
from solver.wire.events import Api

__all__ = ["redact", "request_headers", "retry_after_seconds", "retryable_status"]

# below 500 only these say "ask again later"; every 5xx does too, except 501 (not implemented)
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})


def request_headers(
    api: Api, api_key: str | None, request_id: str, *, stream: bool
) -> dict[str, str]:
    """Headers of a request to a model endpoint of protocol ``api``."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "text/event-stream" if stream else "application/json",
        "Accept-Encoding": "identity",  # raw bytes on the wire == bytes decoded
        "X-Request-ID": request_id,
    }
    if api == "anthropic":
        headers["anthropic-version"] = "2023-06-01"
        if api_key:
            headers["x-api-key"] = api_key
    elif api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def retryable_status(status: int) -> bool:
    """Whether a non-2xx answer may succeed when asked again (later, or elsewhere)."""
    return status in _RETRYABLE_STATUS or (status >= 500 and status != 501)


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delay-seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None  # unreadable: our own backoff applies
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def redact(text: str, secrets: str | Iterable[str | None] | None) -> str:
    """``text`` with every secret replaced by ``***``, and every fragment of one at least
    8 characters long (an upstream may echo the key it refused, cut short or split, and
    messages are shortened), and the credentials of any URL in it masked."""
    if secrets is None:
        return text
    listed: list[str | None] = [secrets] if isinstance(secrets, str) else list(secrets)
    return mask_urls_in(redact_fragments(text, listed))
