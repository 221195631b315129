"""``solver serve bench``: a fixed-duration concurrency sweep over one or more endpoints.

Per concurrency level and endpoint, C workers send streamed requests back to back for
``duration`` seconds; requests still running then get ``grace`` seconds to finish (the rest
are cancelled and not counted). Metrics follow AIPerf's definitions:

- total output tok/s = output tokens of completed requests that left inside the level's
  ``duration`` window / that window (the drain tail, when only the last requests still run,
  would dilute it);
- per-user tok/s of a request = 1 / ITL with ITL = (last token - first token) / (tokens - 1),
  i.e. AIPerf's ``output_token_throughput_per_user``; a request with ITL 0 or one token has no
  value (AIPerf drops it too). P90 is the 90th percentile over requests (the fast tail), P10 is
  reported beside it for "90% of users get at least";
- TTFT percentiles over completed requests; completed, failed and cancelled counts.

Output tokens are the server's ``usage.completion_tokens`` (AIPerf re-tokenises the text unless
``--use-server-token-count``); without usage, one per delta-bearing chunk, which under
speculative decoding understates speed by about the accept length: such levels are warned about.
Each request's first user message gets a distinct prefix by default, so repeats of a small
data set do not hit SGLang's radix cache; ``flush_cache`` empties it before each level, and
``ignore_eos`` keeps every request decoding to ``max_tokens`` (late decode, not just early).
Levels run endpoint after endpoint within each level, so two endpoints are compared side by side
in one run under the same machine conditions. With ``thinking_budget`` each endpoint is run twice
a level, as it is and then with the budget in SGLang's fields (``custom_logit_processor`` and
``custom_params``, as the solver sends them): what the processor costs the server's decode, side
by side.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from solver.errors import ConfigError, EndpointUnavailable, InputError
from solver.serve.stream import StreamResult, chat_url, stream_chat
from solver.wire import budget_fields

BUILTIN_PROMPTS = (
    "Prove that there are infinitely many primes, then give two different proofs of it.",
    "Show that the sum of the first n odd numbers is n squared, in full detail.",
    "Explain, step by step, why every finite group of prime order is cyclic.",
    "Find all real x with x^4 - 5x^2 + 4 = 0 and justify every step.",
)


@dataclass(frozen=True)
class BenchOptions:
    concurrency: tuple[int, ...]
    duration: float
    grace: float = 60.0
    max_tokens: int = 1024  # for dataset items that do not set one
    timeout: float = 3600.0
    api_key: str | None = None
    model: str | None = None
    distinct_prompts: bool = True
    flush_cache: bool = False
    ignore_eos: bool = False
    # Also run each endpoint with this thinking budget in every request (SGLang's processor).
    thinking_budget: int | None = None


@dataclass
class RequestRecord:
    started: float
    ttft: float | None
    ended: float
    output_tokens: int
    per_user: float | None
    error: str | None
    has_usage: bool = True
    token_times: tuple[float, ...] = ()


@dataclass
class LevelResult:
    endpoint: str
    concurrency: int
    duration_s: float
    completed: int
    failed: int
    cancelled: int
    output_tokens: int
    total_output_tok_s: float
    per_user_tok_s: dict[str, float | None]
    ttft_ms: dict[str, float | None]
    errors: list[str] = field(default_factory=list)
    without_usage: int = 0  # completed responses whose tokens were counted as chunks


def load_dataset(path: Path | None, max_tokens: int) -> list[dict[str, Any]]:
    """JSONL of Chat Completions bodies (``messages``, optional ``max_tokens``, ``tools``), or
    of ``{"prompt": ...}``; None gives a small built-in set of proof prompts."""
    if path is None:
        return [
            {"messages": [{"role": "user", "content": p}], "max_tokens": max_tokens}
            for p in BUILTIN_PROMPTS
        ]
    items: list[dict[str, Any]] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"{path}: cannot read dataset ({exc.strerror})") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise InputError(f"{path}:{number}: not a JSON line") from None
        if isinstance(row, dict) and isinstance(row.get("prompt"), str):
            row = {"messages": [{"role": "user", "content": row["prompt"]}]}
        if not isinstance(row, dict) or not isinstance(row.get("messages"), list):
            raise InputError(f"{path}:{number}: expected an object with messages or prompt")
        body = {k: v for k, v in row.items() if k in ("messages", "max_tokens", "tools")}
        body.setdefault("max_tokens", max_tokens)
        items.append(body)
    if not items:
        raise InputError(f"{path}: empty dataset")
    return items


def percentile(values: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default, which AIPerf uses)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def record_of(result: StreamResult) -> RequestRecord:
    ttft = None if result.first_token is None else result.first_token - result.started
    tokens = result.output_tokens
    per_user = None
    if result.ok and tokens > 1 and len(result.token_times) > 1:
        span = result.token_times[-1] - (result.first_token or result.token_times[0])
        if span > 0:
            per_user = (tokens - 1) / span  # 1 / mean inter-token latency
    error = result.error or (None if result.finish_reason else "stream ended without finish")
    has_usage = bool(result.usage and isinstance(result.usage.get("completion_tokens"), int))
    return RequestRecord(
        result.started, ttft, result.ended, tokens, per_user, error, has_usage,
        tuple(result.token_times),
    )  # fmt: skip


def _tokens_inside(record: RequestRecord, start: float, end: float) -> float:
    """The record's output tokens that left within [start, end], pro rata over its chunks."""
    if not record.token_times:
        return float(record.output_tokens) if start <= record.ended <= end else 0.0
    inside = sum(1 for t in record.token_times if start <= t <= end)
    return record.output_tokens * inside / len(record.token_times)


def summarize(
    endpoint: str,
    concurrency: int,
    records: list[RequestRecord],
    cancelled: int,
    window: tuple[float, float] | None = None,
) -> LevelResult:
    """``window``: the level's sending period; throughput counts the tokens inside it."""
    done = [r for r in records if r.error is None]
    failed = [r for r in records if r.error is not None]
    tokens = sum(r.output_tokens for r in done)
    if window is not None and done:
        duration = window[1] - window[0]
        throughput = sum(_tokens_inside(r, *window) for r in done) / duration
    else:
        duration = (max(r.ended for r in done) - min(r.started for r in done)) if done else 0.0
        throughput = tokens / duration if duration > 0 else 0.0
    per_user = [r.per_user for r in done if r.per_user is not None]
    ttfts = [r.ttft * 1000 for r in done if r.ttft is not None]
    return LevelResult(
        endpoint=endpoint,
        concurrency=concurrency,
        duration_s=round(duration, 3),
        completed=len(done),
        failed=len(failed),
        cancelled=cancelled,
        output_tokens=tokens,
        total_output_tok_s=throughput,
        per_user_tok_s={
            "p10": percentile(per_user, 10),
            "p50": percentile(per_user, 50),
            "p90": percentile(per_user, 90),
            "mean": sum(per_user) / len(per_user) if per_user else None,
        },
        ttft_ms={q: percentile(ttfts, v) for q, v in (("p50", 50), ("p90", 90), ("p99", 99))},
        errors=sorted({r.error for r in failed if r.error})[:5],
        without_usage=sum(1 for r in done if not r.has_usage),
    )


async def _level(
    client: httpx.AsyncClient,
    base_url: str,
    model: str,
    items: list[dict[str, Any]],
    concurrency: int,
    options: BenchOptions,
    budget: int | None = None,
) -> LevelResult:
    url = chat_url(base_url)
    # the fields the solver sends for a budget, for this model's family
    budgeted: dict[str, Any] = {} if budget is None else budget_fields(model, budget)
    records: list[RequestRecord] = []
    counter = iter(range(10**12))
    if options.flush_cache:
        await _flush_cache(client, base_url)
    started = time.perf_counter()
    stop_at = started + options.duration

    async def worker() -> None:
        while time.perf_counter() < stop_at:
            number = next(counter)
            body = {**items[number % len(items)], "model": model}
            if options.distinct_prompts:
                body["messages"] = _distinct(body["messages"], number)
            if options.ignore_eos:
                body["ignore_eos"] = True  # SGLang's sampling extension: decode to max_tokens
            body.update(budgeted)
            result = await stream_chat(client, url, body, timeout=options.timeout)
            records.append(record_of(result))

    tasks = [asyncio.create_task(worker()) for _ in range(concurrency)]
    await asyncio.sleep(max(0.0, stop_at - time.perf_counter()))
    _, pending = await asyncio.wait(tasks, timeout=options.grace)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    return summarize(
        budgeted_label(base_url, budget),
        concurrency,
        records,
        cancelled=len(pending),
        window=(started, stop_at),
    )


def _distinct(messages: list[dict[str, Any]], number: int) -> list[dict[str, Any]]:
    """A request-unique first line in the first user message: no shared prefix to cache."""
    out = [dict(m) for m in messages]
    for message in out:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            message["content"] = f"[request {number}]\n{message['content']}"
            break
    return out


async def _flush_cache(client: httpx.AsyncClient, base_url: str) -> None:
    """SGLang's /flush_cache empties the radix cache (it declines while requests run)."""
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        await client.post(root + "/flush_cache", timeout=60)
    except httpx.HTTPError:
        return  # not SGLang, or busy: the level runs with whatever is cached


async def _model_of(client: httpx.AsyncClient, base_url: str) -> str:
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        response = await client.get(root + "/v1/models", timeout=30)
        return str(response.json()["data"][0]["id"])
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
        raise EndpointUnavailable(f"{root}/v1/models: no model listed") from None


async def _sweep(
    endpoints: list[str],
    items: list[dict[str, Any]],
    options: BenchOptions,
    progress: Callable[[LevelResult], None],
    starting: Callable[[str, int], None],
) -> list[LevelResult]:
    headers = {"Authorization": f"Bearer {options.api_key}"} if options.api_key else {}
    top = max(options.concurrency)
    limits = httpx.Limits(max_connections=top + 8, max_keepalive_connections=top + 8)
    results: list[LevelResult] = []
    async with httpx.AsyncClient(headers=headers, limits=limits, trust_env=False) as client:
        models = {e: options.model or await _model_of(client, e) for e in endpoints}
        budgets = (None,) if options.thinking_budget is None else (None, options.thinking_budget)
        for concurrency in options.concurrency:
            for endpoint in endpoints:
                for budget in budgets:
                    label = budgeted_label(endpoint, budget)
                    starting(label, concurrency)
                    level = await _level(
                        client, endpoint, models[endpoint], items, concurrency, options, budget
                    )
                    progress(level)
                    results.append(level)
    return results


def budgeted_label(endpoint: str, budget: int | None) -> str:
    """How an endpoint run with a thinking budget is named in the results."""
    return endpoint if budget is None else f"{endpoint} (thinking budget {budget})"


def run_bench(
    endpoints: list[str],
    items: list[dict[str, Any]],
    options: BenchOptions,
    progress: Callable[[LevelResult], None] = lambda _: None,
    starting: Callable[[str, int], None] = lambda endpoint, concurrency: None,
) -> list[LevelResult]:
    if not endpoints:
        raise InputError("give at least one --endpoint")
    if options.duration <= 0:
        raise InputError("--duration must be positive")
    return asyncio.run(_sweep(endpoints, items, options, progress, starting))


def summary_json(results: list[LevelResult], options: BenchOptions) -> dict[str, Any]:
    endpoints = list(dict.fromkeys(r.endpoint for r in results))
    ratios = []
    if len(endpoints) > 1:
        by = {(r.endpoint, r.concurrency): r for r in results}
        for c in options.concurrency:
            first, other = by.get((endpoints[0], c)), by.get((endpoints[1], c))
            if first and other and first.total_output_tok_s:
                p90a, p90b = first.per_user_tok_s["p90"], other.per_user_tok_s["p90"]
                ratios.append(
                    {
                        "concurrency": c,
                        "total_output_tok_s": other.total_output_tok_s / first.total_output_tok_s,
                        "p90_per_user_tok_s": (p90b / p90a) if p90a and p90b else None,
                    }
                )
    return {
        "method": "fixed duration per level; AIPerf output_token_throughput_per_user definitions",
        "duration_s": options.duration,
        "grace_s": options.grace,
        "endpoints": endpoints,
        "levels": [asdict(r) for r in results],
        "ratios_second_over_first": ratios,
    }


def render_table(results: list[LevelResult]) -> str:
    def fmt(value: float | None, digits: int = 1) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    names = {e: f"E{i + 1}" for i, e in enumerate(dict.fromkeys(r.endpoint for r in results))}
    rows = [f"{tag} = {url}" for url, tag in names.items()]
    columns = ("total tok/s", "p90 user", "p50 user", "p10 user", "ttft p50", "ttft p99")
    header = f"{'ep':<3} {'conc':>4} " + " ".join(f"{c:>11}" if i == 0 else f"{c:>9}"
                                                   for i, c in enumerate(columns))  # fmt: skip
    header += f" {'done':>5} {'fail':>4} {'cxl':>4}"
    rows += [header, "-" * len(header)]
    for r in results:
        u, t = r.per_user_tok_s, r.ttft_ms
        rows.append(
            f"{names[r.endpoint]:<3} {r.concurrency:>4} {r.total_output_tok_s:>11.1f} "
            f"{fmt(u['p90']):>9} {fmt(u['p50']):>9} {fmt(u['p10']):>9} "
            f"{fmt(t['p50']):>9} {fmt(t['p99']):>9} {r.completed:>5} {r.failed:>4} {r.cancelled:>4}"
        )
    rows += [f"warning: {line}" for line in level_warnings(results, names)]
    return "\n".join(rows)


def level_warnings(results: list[LevelResult], names: dict[str, str] | None = None) -> list[str]:
    """Levels whose numbers do not measure the server: nothing or too little completed."""
    out: list[str] = []
    for r in results:
        where = f"{(names or {}).get(r.endpoint, r.endpoint)} c{r.concurrency}"
        sent = r.completed + r.failed + r.cancelled
        if r.completed == 0:
            out.append(
                f"{where}: no request completed ({r.failed} failed, {r.cancelled} cancelled), "
                "so nothing was measured; raise --duration or --grace, or lower --max-tokens"
            )
        if r.without_usage:
            out.append(
                f"{where}: {r.without_usage} responses carried no usage, so their tokens were "
                "counted as chunks; under speculative decoding a chunk holds several tokens and "
                "per-user speed is understated by about the accept length"
            )
        if r.completed and r.cancelled > sent / 2:
            out.append(
                f"{where}: {r.cancelled} of {sent} requests were cancelled at the end of the "
                "level; the numbers rest on the few that finished (raise --duration or --grace)"
            )
    return out


def empty_levels(results: list[LevelResult]) -> list[LevelResult]:
    return [r for r in results if r.completed == 0]


def plot(results: list[LevelResult], path: Path) -> None:
    """Total output tok/s against P90 per-user tok/s, one curve per endpoint."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError(
            "the plot needs matplotlib: pip install 'olympiad-solver[plot]'"
        ) from None
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for endpoint in dict.fromkeys(r.endpoint for r in results):
        points = [
            (r.per_user_tok_s["p90"], r.total_output_tok_s, r.concurrency)
            for r in results
            if r.endpoint == endpoint and r.per_user_tok_s["p90"] is not None
        ]
        if not points:
            continue
        xs, ys, _ = zip(*points, strict=True)
        ax.plot(xs, ys, marker="o", label=endpoint)
        for x, y, c in points:
            ax.annotate(f"c{c}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("P90 per-user output tok/s (1 / mean inter-token latency)")
    ax.set_ylabel("total output tok/s")
    ax.set_title("throughput against per-user speed")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
