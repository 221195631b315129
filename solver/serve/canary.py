"""``solver serve check``: a canary suite to run against an endpoint before a long session.

Probes (each pass/fail/warn/skip with its numbers):

- ``determinism-repeat``  the same greedy request several times in a row;
- ``determinism-batch``   the same request inside concurrent batches of other sizes and mixes.
                          Both compare the *final answers* (the 40 primes and their sum, checked
                          against the truth): a wrong or differing answer fails, a difference in
                          the text alone is a ``warn``. SGLang documents that identical greedy
                          requests differ under dynamic batching and prefix caching, and
                          ``--enable-deterministic-inference`` (fa3/triton/fa4 attention only) is
                          no option for DSA models; when ``/server_info`` says that mode is on,
                          a text difference fails;
- ``arithmetic-chain``    a long chain of exact modular arithmetic, every step checked; a few
                          wrong steps (``chain_tolerance``) are a ``warn``;
- ``arithmetic-concurrent`` checked chains sent all at once at the production concurrency, so
                          speculative verify batches are as large as in production (c48 with
                          draft 6 verifies about 288 tokens a step; the other probes run at
                          batch 1-8);
- ``recall-1k/32k/128k``  a fact planted near the start of ~1k, 32k and 128k tokens of context,
                          clamped to the served context length;
- ``reasoning-split``     reasoning arrives in ``reasoning_content``, the answer in ``content``;
- ``tool-call``           a tool call whose streamed arguments parse into JSON of the right types;
- ``finish-reasons``      every stream of the suite ended with a finish reason;
- ``spec-acceptance``     speculative accept length over this suite's own window (the change of
                          ``generation_tokens_total / spec_verify_calls_total`` in ``/metrics``,
                          not the lifetime average of ``/server_info``), failed below
                          ``min_accept_length``: healthy GLM-5.2 MTP runs measured 2.65-3.77, the
                          gfx950 Block-FP8 bug about 1.3 (sglang#28471).

Server facts come from ``/server_info``, else ``/get_server_info`` (older SGLang, routers).
Behind a router (sglang-router and smg answer 404 on ``/server_info``), facts and counters are
read from the workers directly: given with ``workers`` or listed by the router.

A saved report is a baseline: a later run flags every probe that fails now and did not fail then,
and numbers that fell beyond their tolerance (chain steps right, accept length). Compared with a
baseline, the check passes or fails on those regressions alone: a failure the baseline also had
is reported as known.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import httpx

from solver.errors import ConfigError, EndpointUnavailable
from solver.serve import canary_probes as P
from solver.serve.metrics import accept_length, read_counters_async
from solver.serve.stream import StreamResult, chat_url, stream_chat

# warn: the probe saw a difference the server's own configuration explains
Status = Literal["pass", "fail", "skip", "warn"]
REPORT_FORMAT = 1


@dataclass
class ProbeResult:
    name: str
    status: Status
    summary: str
    numbers: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CanaryOptions:
    repeats: int = 3
    batch_sizes: tuple[int, ...] = (4, 8)
    chain_steps: int = 300
    chain_tolerance: int | None = None  # wrong steps still a warn; None: 1% of the steps
    concurrency: int = 48  # the recipes' production concurrency
    concurrent_chain_steps: int = 60
    min_accept_length: float = 2.0  # between the broken ~1.3 and the healthy 2.65-3.77
    workers: tuple[str, ...] = ()  # behind a router: the workers' base URLs
    max_tokens: int = 32768
    recall_answer_tokens: int = 4096
    context_length: int | None = None  # None: as the endpoint reports it
    model: str | None = None  # None: the first model of /v1/models
    api_key: str | None = None
    timeout: float = 1800.0
    progress: Callable[[str], None] | None = None  # a line per probe start and per request


@dataclass
class CanaryReport:
    endpoint: str
    model: str
    context_length: int | None
    started: str
    probes: list[ProbeResult]
    server: dict[str, Any] = field(default_factory=dict)
    regressions: list[str] = field(default_factory=list)
    baseline: str | None = None  # where the baseline came from, once compared
    known_failures: list[str] = field(default_factory=list)  # failed in the baseline too
    format: int = REPORT_FORMAT

    @property
    def passed(self) -> bool:
        if self.baseline is not None:
            return not self.regressions
        return all(p.status != "fail" for p in self.probes)

    def as_json(self) -> dict[str, Any]:
        return asdict(self) | {"passed": self.passed}


def run_canary(base_url: str, options: CanaryOptions | None = None) -> CanaryReport:
    return asyncio.run(_run(base_url, options or CanaryOptions()))


async def _run(base_url: str, options: CanaryOptions) -> CanaryReport:
    headers = {"Authorization": f"Bearer {options.api_key}"} if options.api_key else {}
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(headers=headers, limits=limits, trust_env=False) as client:
        root = base_url.rstrip("/").removesuffix("/v1")
        model, context = await _discover(client, root, options)
        suite = _Suite(client, chat_url(root), model, options)
        started = datetime.now(UTC).isoformat(timespec="seconds")
        server = await _server_facts(client, root, options.workers)
        before = await _counters(client, server["workers"])
        probes = [
            *(await suite.determinism()),
            await suite.arithmetic(),
            await suite.concurrent_arithmetic(),
            *(await suite.recall(context)),
            await suite.reasoning(),
            await suite.tool_call(),
        ]
        probes.append(suite.finish_reasons())
        after = await _counters(client, server["workers"])
        probes.append(_acceptance(before, after, server, options.min_accept_length))
    probes = [_judge_text_differences(p, server) for p in probes]
    return CanaryReport(base_url, model, context, started, probes, server)


async def _discover(
    client: httpx.AsyncClient, root: str, options: CanaryOptions
) -> tuple[str, int | None]:
    try:
        response = await client.get(root + "/v1/models", timeout=30)
    except httpx.HTTPError as exc:
        raise EndpointUnavailable(f"{root}/v1/models: {type(exc).__name__}") from None
    if response.status_code != 200:
        raise EndpointUnavailable(f"{root}/v1/models answered HTTP {response.status_code}")
    try:
        data = response.json()["data"]
        first = data[0]
    except (ValueError, KeyError, IndexError, TypeError):
        raise EndpointUnavailable(f"{root}/v1/models: no model listed") from None
    model = options.model or str(first.get("id", ""))
    context = options.context_length
    if context is None and isinstance(first.get("max_model_len"), int):
        context = int(first["max_model_len"])
    if context is None:
        context = await _llama_cpp_context(client, root)
    return model, context


async def _llama_cpp_context(client: httpx.AsyncClient, root: str) -> int | None:
    """llama.cpp reports its per-slot context in /props rather than in /v1/models."""
    try:
        response = await client.get(root + "/props", timeout=30)
        settings = response.json().get("default_generation_settings", {})
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    return n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None


async def _get_json(client: httpx.AsyncClient, url: str) -> Any:
    try:
        response = await client.get(url, timeout=30)
        return response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


async def _server_info(client: httpx.AsyncClient, root: str) -> dict[str, Any] | None:
    for path in ("/server_info", "/get_server_info"):  # the second: older SGLang and routers
        info = await _get_json(client, root + path)
        if isinstance(info, dict):
            return info
    return None


async def _router_workers(client: httpx.AsyncClient, root: str) -> list[str]:
    """The worker URLs a router lists: ``GET /workers`` of sglang-router 0.3.2 and smg 1.13.0
    answers ``{"workers": [{"url": ...}, ...]}``. smg also says ``"is_healthy": false`` of a
    worker its health checks lost (a dead node stays listed): such a worker is left out, so
    the canary reads the workers that serve."""
    listed = await _get_json(client, root + "/workers")
    workers = listed.get("workers") if isinstance(listed, dict) else None
    if not isinstance(workers, list):
        return []
    urls = [
        w.get("url") for w in workers if isinstance(w, dict) and w.get("is_healthy") is not False
    ]
    return [u.rstrip("/") for u in urls if isinstance(u, str) and u.startswith("http")]


async def _server_facts(
    client: httpx.AsyncClient, root: str, workers: tuple[str, ...]
) -> dict[str, Any]:
    """What the servers say about themselves; behind a router, from the workers."""
    info = await _server_info(client, root)
    is_server = isinstance(info, dict) and "internal_states" in info
    targets = list(workers) or ([] if is_server else await _router_workers(client, root))
    facts: dict[str, Any] = {"version": (info or {}).get("version"), "workers": targets or [root]}
    if targets:
        facts["router"] = root
    infos = [info] if not targets else [await _server_info(client, w) for w in targets]
    flags = [i.get("enable_deterministic_inference") for i in infos if isinstance(i, dict)]
    if flags and all(isinstance(f, bool) for f in flags):
        # SGLang flattens its server arguments into /server_info; absent on other servers
        facts["enable_deterministic_inference"] = all(flags)
    lengths = [
        s["avg_spec_accept_length"]
        for i in infos
        if isinstance(i, dict) and isinstance(i.get("internal_states"), list)
        for s in i["internal_states"]
        if isinstance(s, dict) and isinstance(s.get("avg_spec_accept_length"), int | float)
    ]
    if lengths:
        facts["lifetime_avg_spec_accept_length"] = sum(lengths) / len(lengths)
    return facts


async def _counters(client: httpx.AsyncClient, bases: list[str]) -> dict[str, float] | None:
    """The workers' /metrics counters, summed; None when any has no /metrics."""
    total: dict[str, float] = {}
    for base in bases:
        counters = await read_counters_async(client, base, 30)
        if counters is None:
            return None
        for name, value in counters.items():
            total[name] = total.get(name, 0.0) + value
    return total


class _Suite:
    def __init__(
        self, client: httpx.AsyncClient, url: str, model: str, options: CanaryOptions
    ) -> None:
        self.client, self.url, self.model, self.options = client, url, model, options
        self.streams: list[tuple[str, StreamResult]] = []
        self.announced: set[str] = set()

    async def ask(
        self, probe: str, prompt: str, *, max_tokens: int, thinking: bool = True, **extra: Any
    ) -> StreamResult:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "top_p": 1,
            # --max-tokens caps every probe, so a slow or small model finishes the suite
            "max_tokens": min(max_tokens, self.options.max_tokens),
            **extra,
        }
        if not thinking:
            body["chat_template_kwargs"] = {"enable_thinking": False}
        if self.options.progress is not None and probe not in self.announced:
            # a long-reasoning probe can run for many minutes: say it started
            self.announced.add(probe)
            self.options.progress(f"{probe}: started (max_tokens {body['max_tokens']})")
        result = await stream_chat(self.client, self.url, body, timeout=self.options.timeout)
        self.streams.append((probe, result))
        if self.options.progress is not None:
            took = result.ended - result.started
            self.options.progress(
                f"{probe}: {result.output_tokens} tokens in {took:.1f} s, "
                f"finish {result.finish_reason}{', ' + result.error if result.error else ''}"
            )
        return result

    async def determinism(self) -> list[ProbeResult]:
        budget = 2048
        runs = [
            await self.ask("determinism-repeat", P.DETERMINISM_PROMPT, max_tokens=budget)
            for _ in range(self.options.repeats)
        ]
        reference = runs[0]
        repeat = _agreement("determinism-repeat", reference, runs, "repeat")
        batch_runs: list[StreamResult] = []
        sizes: list[int] = []
        for size in self.options.batch_sizes:
            prompts = [P.DETERMINISM_PROMPT] + [
                P.BATCH_COMPANIONS[i % len(P.BATCH_COMPANIONS)] for i in range(size - 1)
            ]
            results = await asyncio.gather(
                *(self.ask("determinism-batch", p, max_tokens=budget) for p in prompts)
            )
            batch_runs.append(results[0])
            sizes.append(size)
        batch = _agreement("determinism-batch", reference, batch_runs, "batch size")
        batch.numbers["batch_sizes"] = sizes
        return [repeat, batch]

    def tolerance(self, steps: int) -> int:
        if self.options.chain_tolerance is not None:
            return self.options.chain_tolerance
        return max(1, steps // 100)

    async def arithmetic(self) -> ProbeResult:
        chain = P.make_chain(self.options.chain_steps)
        result = await self.ask(
            "arithmetic-chain", P.chain_prompt(chain), max_tokens=self.options.max_tokens
        )
        if result.error:
            return ProbeResult("arithmetic-chain", "fail", f"request failed: {result.error}")
        answer = result.content or result.reasoning
        numbers = P.check_chain(chain, answer)
        numbers["output_tokens"] = result.output_tokens
        numbers["finish_reason"] = result.finish_reason
        numbers["tolerance"] = self.tolerance(numbers["steps"])
        wrong = numbers["steps"] - numbers["correct"]
        status: Status = (
            "pass" if not wrong else "warn" if wrong <= numbers["tolerance"] else "fail"
        )
        summary = f"{numbers['correct']}/{numbers['steps']} steps right"
        if numbers["first_wrong_step"] is not None:
            summary += f", first wrong at step {numbers['first_wrong_step']}"
        if status == "warn":
            summary += f" (within the tolerance of {numbers['tolerance']})"
        if result.finish_reason == "length":
            summary += " (truncated: raise --max-tokens)"
        if not result.content and result.reasoning:
            summary += " (answer only in reasoning_content)"
        return ProbeResult("arithmetic-chain", status, summary, numbers)

    async def concurrent_arithmetic(self) -> ProbeResult:
        """Checked chains all at once: correctness where production runs, large verify batches."""
        name, count = "arithmetic-concurrent", self.options.concurrency
        if count < 2:
            return ProbeResult(name, "skip", "concurrency below 2")
        steps = self.options.concurrent_chain_steps
        chains = [P.make_chain(steps, seed=100 + i) for i in range(count)]
        results = await asyncio.gather(
            *(self.ask(name, P.chain_prompt(c), max_tokens=self.options.max_tokens) for c in chains)
        )
        tolerance = self.tolerance(steps)
        failed_requests = sum(1 for r in results if r.error)
        checks = [
            P.check_chain(c, r.content or r.reasoning)
            for c, r in zip(chains, results, strict=True)
            if not r.error
        ]
        bad = [c for c in checks if c["steps"] - c["correct"] > tolerance]
        numbers: dict[str, Any] = {
            "concurrency": count,
            "steps_each": steps,
            "tolerance": tolerance,
            "failed_requests": failed_requests,
            "chains_wrong": len(bad),
            "worst_correct": min((c["correct"] for c in checks), default=0),
        }
        if failed_requests or bad:
            summary = f"{len(bad)} of {count} concurrent chains wrong"
            if failed_requests:
                summary += f", {failed_requests} requests failed"
            return ProbeResult(name, "fail", summary, numbers)
        return ProbeResult(name, "pass", f"{count} concurrent chains of {steps} right", numbers)

    async def recall(self, context: int | None) -> list[ProbeResult]:
        budget = min(self.options.recall_answer_tokens, self.options.max_tokens)
        depths = P.recall_depths(context, budget)
        labels = ("recall-1k", "recall-32k", "recall-128k")
        out: list[ProbeResult] = []
        for index, label in enumerate(labels):
            if index >= len(depths):
                out.append(ProbeResult(label, "skip", f"served context {context} is too short"))
                continue
            item = P.recall_item(depths[index], seed=index + 1)
            result = await self.ask(label, item.prompt, max_tokens=budget, thinking=False)
            numbers = {"depth_tokens": item.depth_tokens, "prompt_chars": len(item.prompt)}
            if result.usage and isinstance(result.usage.get("prompt_tokens"), int):
                numbers["prompt_tokens"] = result.usage["prompt_tokens"]
            if result.error:
                out.append(ProbeResult(label, "fail", f"request failed: {result.error}", numbers))
                continue
            found = item.code in result.content or item.code in result.reasoning
            summary = f"{'recalled' if found else 'missed'} the code at ~{item.depth_tokens} tokens"
            out.append(ProbeResult(label, "pass" if found else "fail", summary, numbers))
        return out

    async def reasoning(self) -> ProbeResult:
        result = await self.ask("reasoning-split", P.REASONING_PROMPT, max_tokens=8192)
        numbers = {"reasoning_chars": len(result.reasoning), "content_chars": len(result.content)}
        if result.error:
            return ProbeResult(
                "reasoning-split", "fail", f"request failed: {result.error}", numbers
            )
        problems = []
        if not result.reasoning:
            problems.append("no reasoning_content (reasoning parser off, or thinking disabled)")
        if not result.content:
            problems.append("empty content: the answer stayed in reasoning_content (sglang#37645)")
        if "<think>" in result.content or "</think>" in result.content:
            problems.append("think tags leaked into content")
        if "</think>" in result.reasoning:
            problems.append("a closing think tag inside reasoning_content")
        if problems:
            return ProbeResult("reasoning-split", "fail", "; ".join(problems), numbers)
        return ProbeResult("reasoning-split", "pass", "reasoning and answer separated", numbers)

    async def tool_call(self) -> ProbeResult:
        result = await self.ask(
            "tool-call", P.TOOL_PROMPT, max_tokens=8192, tools=[P.TOOL_SPEC], tool_choice="auto"
        )
        numbers: dict[str, Any] = {"calls": len(result.tool_calls)}
        numbers["finish_reason"] = result.finish_reason
        if result.error:
            return ProbeResult("tool-call", "fail", f"request failed: {result.error}", numbers)
        if not result.tool_calls:
            return ProbeResult("tool-call", "fail", "no tool call (parser off or wrong?)", numbers)
        call = result.tool_calls[0]
        ok, why = P.check_tool_call(call.name, call.arguments)
        numbers["arguments"] = call.arguments
        if ok and result.finish_reason != "tool_calls":
            ok, why = False, f"finish_reason {result.finish_reason!r}, expected 'tool_calls'"
        return ProbeResult("tool-call", "pass" if ok else "fail", why, numbers)

    def finish_reasons(self) -> ProbeResult:
        missing = [probe for probe, r in self.streams if r.finish_reason is None]
        errors = [probe for probe, r in self.streams if r.error]
        numbers = {"streams": len(self.streams), "without_finish": len(missing)}
        numbers["errors"] = len(errors)
        if missing:
            where = ", ".join(sorted(set(missing)))
            summary = f"streams without a finish reason in {where}"
            return ProbeResult("finish-reasons", "fail", summary, numbers)
        summary = f"all {len(self.streams)} streams finished"
        return ProbeResult("finish-reasons", "pass", summary, numbers)


def _agreement(
    name: str, reference: StreamResult, runs: list[StreamResult], unit: str
) -> ProbeResult:
    """Final answers must be right and agree; a text difference alone is judged later."""
    numbers: dict[str, Any] = {"runs": len(runs)}
    numbers["distinct"] = len({r.text for r in [reference, *runs]})
    if not reference.text:
        return ProbeResult(name, "fail", "empty output", numbers)
    # the answer left in reasoning_content is reasoning-split's finding, not this probe's
    wrong = [i for i, r in enumerate(runs) if not P.determinism_answer_is_right(_answer(r))]
    if not P.determinism_answer_is_right(_answer(reference)) or wrong:
        numbers["wrong_answers"] = len(wrong)
        return ProbeResult(
            name, "fail", f"{len(wrong)} of {len(runs)} {unit} runs gave a wrong answer", numbers
        )
    differing = [r for r in runs if r.text != reference.text]
    if differing:
        first = P.first_difference(reference.text, differing[0].text)
        numbers["first_difference_at_char"] = first
        return ProbeResult(
            name,
            "fail",
            f"{len(differing)} of {len(runs)} {unit} runs differ in text (from char {first}); "
            "the final answers agree and are right",
            numbers,
        )
    return ProbeResult(name, "pass", f"{len(runs)} {unit} runs identical", numbers)


def _answer(result: StreamResult) -> str:
    return result.content or result.reasoning


def _judge_text_differences(probe: ProbeResult, server: dict[str, Any]) -> ProbeResult:
    """Stock SGLang is not run-to-run or batch invariant: with right and agreeing answers, a
    text difference is expected there, unless the server promises deterministic inference."""
    if not probe.name.startswith("determinism-") or probe.status != "fail":
        return probe
    if probe.numbers.get("first_difference_at_char") is None:
        return probe  # empty or wrong answers: not explained by batching
    if server.get("enable_deterministic_inference") is True:
        summary = f"{probe.summary}; the server runs --enable-deterministic-inference"
        return ProbeResult(probe.name, "fail", summary, probe.numbers)
    summary = (
        f"{probe.summary}; expected: greedy requests differ under dynamic batching and prefix "
        "caching without --enable-deterministic-inference"
    )
    return ProbeResult(probe.name, "warn", summary, probe.numbers)


def _acceptance(
    before: dict[str, float] | None,
    after: dict[str, float] | None,
    server: dict[str, Any],
    floor: float,
) -> ProbeResult:
    name = "spec-acceptance"
    measured = accept_length(before, after)
    lifetime = server.get("lifetime_avg_spec_accept_length")
    if measured is None:
        if lifetime is None:
            return ProbeResult(name, "skip", "no speculative decoding reported")
        numbers = {"lifetime_avg_spec_accept_length": round(float(lifetime), 3)}
        return ProbeResult(
            name,
            "warn",
            f"no /metrics counters (start the server with --enable-metrics); the lifetime "
            f"average {lifetime:.2f} of /server_info is not judged",
            numbers,
        )
    value, steps = measured
    numbers = {"accept_length": round(value, 3), "verify_steps": int(steps), "floor": floor}
    if lifetime is not None:
        numbers["lifetime_avg_spec_accept_length"] = round(float(lifetime), 3)
    if value < floor:
        summary = (
            f"accept length {value:.2f} over this check, below {floor:.2f} (healthy MTP "
            "measured 2.65-3.77; about 1.3 was the gfx950 Block-FP8 bug, sglang#28471)"
        )
        return ProbeResult(name, "fail", summary, numbers)
    return ProbeResult(name, "pass", f"accept length {value:.2f} over this check", numbers)


# ---------------------------------------------------------------- baselines


def load_baseline(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such baseline (save one with --save-baseline)") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: not a canary report ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != REPORT_FORMAT:
        raise ConfigError(f"{path}: not a canary report of format {REPORT_FORMAT}")
    return data


def apply_baseline(report: CanaryReport, baseline: dict[str, Any], source: str) -> None:
    """Judge the report by what changed: regressions fail it, old failures are only noted."""
    report.regressions = compare(report, baseline)
    report.baseline = source
    before = _baseline_statuses(baseline)
    report.known_failures = [
        p.name for p in report.probes if p.status == "fail" and before.get(p.name) == "fail"
    ]


def _baseline_statuses(baseline: dict[str, Any]) -> dict[str, Any]:
    return {
        p["name"]: p.get("status")
        for p in baseline.get("probes", [])
        if isinstance(p, dict) and "name" in p
    }


def compare(report: CanaryReport, baseline: dict[str, Any]) -> list[str]:
    """What got worse since the baseline."""
    before = {p["name"]: p for p in baseline.get("probes", []) if isinstance(p, dict)}
    out: list[str] = []
    for probe in report.probes:
        old = before.get(probe.name)
        if old is None:
            if probe.status == "fail":
                out.append(f"{probe.name}: not in the baseline, fails now ({probe.summary})")
            continue
        if old.get("status") in ("pass", "warn") and probe.status == "fail":
            out.append(
                f"{probe.name}: {old.get('status')}ed in the baseline, fails now ({probe.summary})"
            )
        elif old.get("status") != "fail" and probe.status == "fail":
            was = old.get("status")
            out.append(f"{probe.name}: {was} in the baseline, fails now ({probe.summary})")
        old_numbers = old.get("numbers") or {}
        if probe.name == "arithmetic-chain":
            was, now = old_numbers.get("correct"), probe.numbers.get("correct")
            slack = probe.numbers.get("tolerance", 0)
            if isinstance(was, int) and isinstance(now, int) and now < was - slack:
                out.append(
                    f"arithmetic-chain: {now} steps right, {was} in the baseline "
                    f"(tolerance {slack})"
                )
        if probe.name == "spec-acceptance":
            was, now = old_numbers.get("accept_length"), probe.numbers.get("accept_length")
            if isinstance(was, int | float) and isinstance(now, int | float) and now < 0.85 * was:
                out.append(f"spec-acceptance: {now:.2f}, {was:.2f} in the baseline (>15% lower)")
    return out


def render_table(report: CanaryReport) -> str:
    rows = [f"canary {report.endpoint}  model {report.model}  context {report.context_length}"]
    width = max(len(p.name) for p in report.probes)
    for probe in report.probes:
        rows.append(f"  {probe.name:<{width}}  {probe.status.upper():<4}  {probe.summary}")
    for line in report.regressions:
        rows.append(f"  REGRESSION  {line}")
    if report.known_failures:
        known = ", ".join(report.known_failures)
        rows.append(f"  known failures (the baseline failed them too): {known}")
    rows.append("PASSED" if report.passed else "FAILED")
    return "\n".join(rows)
