"""One line per request on the proxy's output: what a person watching the terminal needs to
see that requests flow, which provider answered, how fast, and why one failed.

    11:52:07 anthropic glm/glm-4.6 200 success ttfb=312ms 4.1s tokens=1200/340
    11:52:09 chat glm/glm-4.6 529 upstream_idle ttfb=- 300.0s tokens=0/0 error="upstream ..."

The error text was redacted before the record reached here (:meth:`ProxyState.record`).
"""

from __future__ import annotations

import time
from typing import TextIO

from ._telemetry import RequestRecord
from ._wire import dumps

_ERROR_CHARS = 160


def request_line(record: RequestRecord) -> str:
    provider = record.provider or "-"
    model = record.upstream_model or record.model or "-"
    ttfb = "-" if record.ttfb_ms is None else f"{record.ttfb_ms:.0f}ms"
    line = (
        f"{time.strftime('%H:%M:%S')} {record.client_protocol or '-'} {provider}/{model} "
        f"{record.http_status} {record.status} ttfb={ttfb} {record.duration_ms / 1000:.1f}s "
        f"tokens={record.input_tokens}/{record.output_tokens}"
    )
    if record.error:
        line += f" error={dumps(record.error[:_ERROR_CHARS])}"
    return line


def write_line(stream: TextIO, record: RequestRecord) -> None:
    """Best effort: a closed or full terminal must not fail the request it reports."""
    try:
        stream.write(request_line(record) + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass
