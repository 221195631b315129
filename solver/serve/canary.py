"""``solver serve check``: a canary suite to run against an endpoint before a long session.

Probes (each pass/fail/skip with its numbers):

- ``determinism-repeat``  the same greedy request several times in a row gives the same text;
- ``determinism-batch``   the same request inside concurrent batches of other sizes and mixes
                          gives the same text again (SGLang is batch-invariant only with
                          ``--enable-deterministic-inference``: when ``/server_info`` says it
                          is off, a difference is a ``warn``, not a failure);
- ``arithmetic-chain``    a long chain of exact modular arithmetic, every step checked;
- ``recall-1k/32k/128k``  a fact planted near the start of ~1k, 32k and 128k tokens of context,
                          clamped to the served context length;
- ``reasoning-split``     reasoning arrives in ``reasoning_content``, the answer in ``content``;
- ``tool-call``           a tool call whose streamed arguments parse into JSON of the right types;
- ``finish-reasons``      every stream of the suite ended with a finish reason;
- ``spec-acceptance``     speculative accept length from ``/server_info`` (compared with the
                          baseline: about 1.3 was a symptom of the gfx950 precision bug).

A saved report is a baseline: a later run flags every probe that fails now and did not fail then,
and numbers that fell (chain steps right, accept length). Compared with a baseline, the check
passes or fails on those regressions alone: a failure the baseline also had is reported as known.
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
        probes = [
            *(await suite.determinism()),
            await suite.arithmetic(),
            *(await suite.recall(context)),
            await suite.reasoning(),
            await suite.tool_call(),
        ]
        probes.append(suite.finish_reasons())
        server = await _server_facts(client, root)
        probes.append(_acceptance(server))
    probes = [_excuse_batch(p, server) for p in probes]
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


async def _server_facts(client: httpx.AsyncClient, root: str) -> dict[str, Any]:
    try:
        response = await client.get(root + "/server_info", timeout=30)
        info = response.json() if response.status_code == 200 else {}
    except (httpx.HTTPError, ValueError):
        info = {}
    if not isinstance(info, dict):
        return {}
    facts: dict[str, Any] = {"version": info.get("version")}
    # SGLang flattens its server arguments into /server_info; absent on other servers
    deterministic = info.get("enable_deterministic_inference")
    if isinstance(deterministic, bool):
        facts["enable_deterministic_inference"] = deterministic
    states = info.get("internal_states")
    if isinstance(states, list):
        lengths = [
            s["avg_spec_accept_length"]
            for s in states
            if isinstance(s, dict) and isinstance(s.get("avg_spec_accept_length"), int | float)
        ]
        if lengths:
            facts["avg_spec_accept_length"] = sum(lengths) / len(lengths)
    return facts


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
        outputs = [
            (await self.ask("determinism-repeat", P.DETERMINISM_PROMPT, max_tokens=budget)).text
            for _ in range(self.options.repeats)
        ]
        reference = outputs[0]
        repeat = _agreement("determinism-repeat", reference, outputs, "repeat")
        batch_outputs: list[str] = []
        sizes: list[int] = []
        for size in self.options.batch_sizes:
            prompts = [P.DETERMINISM_PROMPT] + [
                P.BATCH_COMPANIONS[i % len(P.BATCH_COMPANIONS)] for i in range(size - 1)
            ]
            results = await asyncio.gather(
                *(self.ask("determinism-batch", p, max_tokens=budget) for p in prompts)
            )
            batch_outputs.append(results[0].text)
            sizes.append(size)
        batch = _agreement("determinism-batch", reference, batch_outputs, "batch size")
        batch.numbers["batch_sizes"] = sizes
        return [repeat, batch]

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
        ok = numbers["correct"] == numbers["steps"]
        summary = f"{numbers['correct']}/{numbers['steps']} steps right"
        if numbers["first_wrong_step"] is not None:
            summary += f", first wrong at step {numbers['first_wrong_step']}"
        if result.finish_reason == "length":
            summary += " (truncated: raise --max-tokens)"
        if not result.content and result.reasoning:
            summary += " (answer only in reasoning_content)"
        return ProbeResult("arithmetic-chain", "pass" if ok else "fail", summary, numbers)

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


def _agreement(name: str, reference: str, outputs: list[str], unit: str) -> ProbeResult:
    differing = [i for i, text in enumerate(outputs) if text != reference]
    numbers: dict[str, Any] = {"runs": len(outputs), "distinct": len(set([reference, *outputs]))}
    if not reference:
        return ProbeResult(name, "fail", "empty output", numbers)
    if differing:
        first = P.first_difference(reference, outputs[differing[0]])
        numbers["first_difference_at_char"] = first
        return ProbeResult(
            name,
            "fail",
            f"{len(differing)} of {len(outputs)} {unit} runs differ (from char {first})",
            numbers,
        )
    return ProbeResult(name, "pass", f"{len(outputs)} {unit} runs identical", numbers)


def _excuse_batch(probe: ProbeResult, server: dict[str, Any]) -> ProbeResult:
    """Stock SGLang is not batch-invariant: a batch difference there is expected, not a fault."""
    if probe.name != "determinism-batch" or probe.status != "fail":
        return probe
    if server.get("enable_deterministic_inference") is not False:
        return probe
    if probe.numbers.get("first_difference_at_char") is None:
        return probe  # empty output or failed requests: not explained by batching
    summary = (
        f"{probe.summary}; expected: the server runs without --enable-deterministic-inference, "
        "so SGLang is not batch-invariant"
    )
    return ProbeResult(probe.name, "warn", summary, probe.numbers)


def _acceptance(server: dict[str, Any]) -> ProbeResult:
    value = server.get("avg_spec_accept_length")
    if value is None:
        return ProbeResult("spec-acceptance", "skip", "no speculative decoding reported")
    numbers = {"avg_spec_accept_length": round(float(value), 3)}
    return ProbeResult("spec-acceptance", "pass", f"accept length {value:.2f}", numbers)


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
        if old.get("status") == "pass" and probe.status == "fail":
            out.append(f"{probe.name}: passed in the baseline, fails now ({probe.summary})")
        elif old.get("status") != "fail" and probe.status == "fail":
            was = old.get("status")
            out.append(f"{probe.name}: {was} in the baseline, fails now ({probe.summary})")
        old_numbers = old.get("numbers") or {}
        if probe.name == "arithmetic-chain":
            was, now = old_numbers.get("correct"), probe.numbers.get("correct")
            if isinstance(was, int) and isinstance(now, int) and now < was:
                out.append(f"arithmetic-chain: {now} steps right, {was} in the baseline")
        if probe.name == "spec-acceptance":
            was, now = (
                old_numbers.get("avg_spec_accept_length"),
                probe.numbers.get("avg_spec_accept_length"),
            )
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
