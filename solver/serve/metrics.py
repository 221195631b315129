"""SGLang's Prometheus counters (``/metrics``, mounted with ``--enable-metrics``), read as sums.

The supervisor tells a busy server from a wedged one by whether token counters still move; the
canary measures speculative acceptance over its own window as the difference of two readings
(``generation_tokens_total / spec_verify_calls_total``), not the lifetime average that
``/server_info`` reports.

Which counter moves when (SGLang 0.5.23, ``srt/observability/metrics_collector.py``):
``generation_tokens_total``, ``prompt_tokens_total`` and ``spec_verify_calls_total`` grow only
when a request finishes (``observe_one_finished_request``), so a server busy with hour-long
streams can leave them still for an hour; ``realtime_tokens_total`` (modes prefill_compute,
prefill_cache, decode) grows on every scheduler iteration (``metrics_reporter.py``), so it is
the live sign of a working scheduler.
"""

from __future__ import annotations

import math
import re

import httpx

REALTIME_TOKENS = "sglang:realtime_tokens_total"
GENERATION_TOKENS = "sglang:generation_tokens_total"
PROMPT_TOKENS = "sglang:prompt_tokens_total"
VERIFY_CALLS = "sglang:spec_verify_calls_total"
# a /metrics page of a multi-rank server is a few hundred kB; far more is not a metrics page
MAX_METRICS_BYTES = 8 * 1024 * 1024

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def parse_counters(text: str) -> dict[str, float]:
    """Every sample summed per metric name (over ranks and label sets); comments skipped."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        if math.isfinite(value):
            totals[match.group(1)] = totals.get(match.group(1), 0.0) + value
    return totals


def read_counters(client: httpx.Client, base_url: str, timeout: float) -> dict[str, float] | None:
    """The counters of ``base_url``, or None when it has no /metrics or does not answer."""
    try:
        with client.stream("GET", base_url + "/metrics", timeout=timeout) as response:
            if response.status_code != 200:
                return None
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_METRICS_BYTES:
                    return None
    except httpx.HTTPError:
        return None
    return parse_counters(body.decode("utf-8", "replace"))


async def read_counters_async(
    client: httpx.AsyncClient, base_url: str, timeout: float
) -> dict[str, float] | None:
    try:
        async with client.stream("GET", base_url + "/metrics", timeout=timeout) as response:
            if response.status_code != 200:
                return None
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_METRICS_BYTES:
                    return None
    except httpx.HTTPError:
        return None
    return parse_counters(body.decode("utf-8", "replace"))


def token_progress(counters: dict[str, float] | None) -> float | None:
    """Tokens processed so far: the per-iteration counter where the server has it, else the
    per-finished-request ones (older servers; they move only as requests end)."""
    if counters is None:
        return None
    if REALTIME_TOKENS in counters:
        return counters[REALTIME_TOKENS]
    if GENERATION_TOKENS not in counters and PROMPT_TOKENS not in counters:
        return None
    return counters.get(GENERATION_TOKENS, 0.0) + counters.get(PROMPT_TOKENS, 0.0)


def accept_length(
    before: dict[str, float] | None, after: dict[str, float] | None
) -> tuple[float, float] | None:
    """(tokens per verify step, verify steps) between two readings; None without speculation."""
    if before is None or after is None:
        return None
    if VERIFY_CALLS not in after or GENERATION_TOKENS not in after:
        return None
    steps = after[VERIFY_CALLS] - before.get(VERIFY_CALLS, 0.0)
    tokens = after[GENERATION_TOKENS] - before.get(GENERATION_TOKENS, 0.0)
    if steps <= 0:
        return None
    return tokens / steps, steps
