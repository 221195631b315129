"""The canary against the scripted fake endpoint: a healthy endpoint passes, also when it is
nondeterministic under batching; long-output corruption, wrong answers at high concurrency, a
low speculative accept length and the known GLM stream bugs are caught; baselines compare."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from solver.errors import ConfigError, EndpointUnavailable
from solver.serve import canary_probes
from solver.serve.canary import (
    CanaryOptions,
    CanaryReport,
    apply_baseline,
    compare,
    load_baseline,
    render_table,
    run_canary,
)
from solver.testing import FakeEndpoint, fake_endpoint
from tests.serve import canary_brain as brain

OPTIONS = CanaryOptions(repeats=3, batch_sizes=(4,), chain_steps=300, concurrency=24, timeout=60)


def run(responder: brain.Brain, context_length: int | None = 65_536) -> CanaryReport:
    with FakeEndpoint(responder, context_length=context_length) as fake:
        report = run_canary(fake.url, OPTIONS)
        assert fake.errors == []
    return report


def run_sglang(
    responder: brain.Brain,
    server_info: dict[str, Any],
    metrics: list[str] | None = None,
    path: str = "/server_info",
) -> CanaryReport:
    """As run(), with a /server_info answer as SGLang gives it (server arguments flattened) at
    ``path``, and /metrics pages served in turn (the last one repeats)."""
    pages = list(metrics or [])

    class Handler(fake_endpoint._Handler):
        def do_GET(self) -> None:
            if self.path == path:
                self._send_json(200, server_info)
            elif self.path == "/metrics" and pages:
                data = (pages.pop(0) if len(pages) > 1 else pages[0]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            else:
                super().do_GET()

    with FakeEndpoint(responder, context_length=65_536) as fake:
        fake._server.RequestHandlerClass = Handler
        report = run_canary(fake.url, OPTIONS)
        assert fake.errors == []
    return report


def status(report: CanaryReport) -> dict[str, str]:
    return {p.name: p.status for p in report.probes}


def test_healthy_endpoint_passes() -> None:
    report = run(brain.healthy)
    assert report.passed, [(p.name, p.summary) for p in report.probes]
    got = status(report)
    assert got["arithmetic-chain"] == "pass"
    chain = next(p for p in report.probes if p.name == "arithmetic-chain")
    assert chain.numbers["correct"] == chain.numbers["steps"] == 300
    assert got["recall-1k"] == got["recall-32k"] == got["recall-128k"] == "pass"
    deepest = next(p for p in report.probes if p.name == "recall-128k")
    # clamped to the served context of 64Ki tokens
    assert 32768 < deepest.numbers["depth_tokens"] < 65_536
    assert got["spec-acceptance"] == "skip"
    assert report.model == "glm-fake" and report.context_length == 65_536


def test_corruption_of_long_outputs_only_is_caught() -> None:
    report = run(brain.corrupt_long_outputs(brain.healthy, after_chars=2000))
    got = status(report)
    assert not report.passed
    assert got["arithmetic-chain"] == "fail"
    chain = next(p for p in report.probes if p.name == "arithmetic-chain")
    assert 100 < chain.numbers["first_wrong_step"] < 300
    # the short probes still pass: only the long chain exposes it
    assert got["recall-1k"] == got["tool-call"] == got["determinism-repeat"] == "pass"


def test_a_healthy_server_nondeterministic_under_batching_passes() -> None:
    # every run's text differs, the final answers are right and agree: stock SGLang behaviour
    report = run(brain.nondeterministic(brain.healthy))
    got = status(report)
    assert got["determinism-repeat"] == got["determinism-batch"] == "warn"
    repeat = next(p for p in report.probes if p.name == "determinism-repeat")
    assert "final answers agree" in repeat.summary and "prefix caching" in repeat.summary
    assert report.passed


def test_wrong_final_answers_fail_determinism() -> None:
    report = run(brain.wrong_final_answers(brain.healthy))
    got = status(report)
    assert got["determinism-repeat"] == "fail"
    repeat = next(p for p in report.probes if p.name == "determinism-repeat")
    assert "wrong answer" in repeat.summary
    assert not report.passed


def test_answers_wrong_only_at_high_concurrency_fail() -> None:
    report = run(brain.wrong_at_high_concurrency(brain.healthy, above=OPTIONS.concurrency // 2))
    got = status(report)
    # the sequential chain and the small batches pass: only production concurrency exposes it
    assert got["arithmetic-chain"] == "pass" and got["determinism-batch"] == "pass"
    assert got["arithmetic-concurrent"] == "fail"
    concurrent = next(p for p in report.probes if p.name == "arithmetic-concurrent")
    assert concurrent.numbers["chains_wrong"] >= 1
    assert concurrent.numbers["concurrency"] == OPTIONS.concurrency
    assert not report.passed


def _metrics(tokens: float, verify_steps: float) -> str:
    return (
        f'sglang:generation_tokens_total{{model_name="m"}} {tokens}\n'
        f'sglang:spec_verify_calls_total{{model_name="m"}} {verify_steps}\n'
    )


def test_an_accept_length_of_1_3_fails() -> None:
    # a long-running server: its lifetime average looks healthy, this check's window does not
    info = {"version": "0.5.23", "internal_states": [{"avg_spec_accept_length": 3.1}]}
    pages = [_metrics(310_000, 100_000), _metrics(310_000 + 1_300, 100_000 + 1_000)]
    report = run_sglang(brain.healthy, info, pages)
    accept = next(p for p in report.probes if p.name == "spec-acceptance")
    assert accept.status == "fail" and accept.numbers["accept_length"] == 1.3
    assert accept.numbers["lifetime_avg_spec_accept_length"] == 3.1
    assert "28471" in accept.summary
    assert not report.passed


def test_a_healthy_accept_length_over_the_window_passes() -> None:
    info = {"version": "0.5.23", "internal_states": [{"avg_spec_accept_length": 1.2}]}
    pages = [_metrics(1_000, 900), _metrics(1_000 + 3_000, 900 + 1_000)]
    report = run_sglang(brain.healthy, info, pages)
    accept = next(p for p in report.probes if p.name == "spec-acceptance")
    assert accept.status == "pass" and accept.numbers["accept_length"] == 3.0
    assert report.passed


def test_server_facts_fall_back_to_get_server_info() -> None:
    info = {"version": "0.5.4", "enable_deterministic_inference": False, "internal_states": []}
    report = run_sglang(brain.healthy, info, path="/get_server_info")
    assert report.server["version"] == "0.5.4"
    assert report.server["enable_deterministic_inference"] is False


def test_behind_a_router_the_workers_are_read_directly() -> None:
    # the router answers 404 on /server_info; the worker's facts and counters are what counts
    info = {"version": "0.5.23", "enable_deterministic_inference": False, "internal_states": []}
    pages = [_metrics(0, 0), _metrics(1_300, 1_000)]
    with FakeEndpoint(brain.healthy, context_length=65_536) as router:
        worker = _sglang_worker(info, pages)
        try:
            options = replace(OPTIONS, workers=(worker.url,))
            report = run_canary(router.url, options)
        finally:
            worker.close()
    assert report.server["workers"] == [worker.url] and report.server["router"] == router.url
    assert report.server["enable_deterministic_inference"] is False
    assert status(report)["spec-acceptance"] == "fail"


def test_a_router_lists_its_workers_for_the_canary() -> None:
    info = {"version": "0.5.23", "enable_deterministic_inference": False, "internal_states": []}
    worker = _sglang_worker(info, [_metrics(0, 0)])

    class Router(fake_endpoint._Handler):
        def do_GET(self) -> None:
            if self.path == "/workers":  # as sglang-router 0.3.2 and smg 1.13.0 answer
                self._send_json(200, {"workers": [{"id": "w0", "url": worker.url + "/"}]})
            elif self.path in ("/server_info", "/get_server_info"):
                self._send_json(404, {"error": "unknown_url"})
            else:
                super().do_GET()

    try:
        with FakeEndpoint(brain.healthy, context_length=65_536) as router:
            router._server.RequestHandlerClass = Router
            report = run_canary(router.url, OPTIONS)
    finally:
        worker.close()
    assert report.server["workers"] == [worker.url]
    assert report.server["enable_deterministic_inference"] is False


def _sglang_worker(info: dict[str, Any], pages: list[str]) -> FakeEndpoint:
    class Handler(fake_endpoint._Handler):
        def do_GET(self) -> None:
            if self.path == "/server_info":
                self._send_json(200, info)
            elif self.path == "/metrics":
                data = (pages.pop(0) if len(pages) > 1 else pages[0]).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            else:
                super().do_GET()

    worker = FakeEndpoint(brain.healthy).__enter__()
    worker._server.RequestHandlerClass = Handler
    return worker


def test_string_typed_tool_arguments_are_caught() -> None:
    report = run(brain.string_tool_arguments(brain.healthy))
    tool = next(p for p in report.probes if p.name == "tool-call")
    assert tool.status == "fail" and "35564" in tool.summary


def test_answer_left_in_reasoning_is_caught() -> None:
    report = run(brain.answer_left_in_reasoning(brain.healthy))
    split = next(p for p in report.probes if p.name == "reasoning-split")
    assert split.status == "fail" and "37645" in split.summary


def test_short_context_skips_deep_recall() -> None:
    report = run(brain.healthy, context_length=8192)
    got = status(report)
    assert got["recall-1k"] == "pass"
    # the 32k probe runs as deep as the served context allows; nothing is left for a deeper one
    clamped = next(p for p in report.probes if p.name == "recall-32k")
    assert clamped.status == "pass" and clamped.numbers["depth_tokens"] < 8192
    assert got["recall-128k"] == "skip"
    assert report.passed


def test_baseline_comparison_flags_regressions(tmp_path: Path) -> None:
    baseline_file = tmp_path / "baseline.json"
    good = run(brain.healthy)
    baseline_file.write_text(json.dumps(good.as_json()))
    baseline = load_baseline(baseline_file)
    assert compare(good, baseline) == []
    bad = run(brain.corrupt_long_outputs(brain.healthy))
    regressions = compare(bad, baseline)
    assert any(r.startswith("arithmetic-chain: passed in the baseline") for r in regressions)
    assert any("steps right" in r for r in regressions)


def test_a_chain_step_or_two_lost_is_within_the_tolerance(tmp_path: Path) -> None:
    good = run(brain.healthy)
    baseline = json.loads(json.dumps(good.as_json()))
    # only the last line of the 300-step answer is corrupted: one step lost
    answer = brain._chain_answer(canary_probes.chain_prompt(canary_probes.make_chain(300)))
    slightly = run(brain.corrupt_long_outputs(brain.healthy, after_chars=len(answer) - 4))
    chain = next(p for p in slightly.probes if p.name == "arithmetic-chain")
    lost = chain.numbers["steps"] - chain.numbers["correct"]
    assert 0 < lost <= chain.numbers["tolerance"] == 3
    assert chain.status == "warn"
    assert compare(slightly, baseline) == []


def test_bad_baseline_and_unreachable_endpoint(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    with pytest.raises(ConfigError):
        load_baseline(bad)
    with pytest.raises(ConfigError):
        load_baseline(tmp_path / "missing.json")
    with pytest.raises(EndpointUnavailable):
        run_canary("http://127.0.0.1:9", OPTIONS)


def test_batch_difference_on_stock_sglang_is_a_warning() -> None:
    # repeats agree, batches differ: what SGLang does without deterministic inference
    responder = brain.batch_variant(brain.healthy, same_for=OPTIONS.repeats)
    info = {"version": "0.5.23", "enable_deterministic_inference": False, "internal_states": []}
    report = run_sglang(responder, info)
    got = status(report)
    assert got["determinism-repeat"] == "pass"
    assert got["determinism-batch"] == "warn"
    batch = next(p for p in report.probes if p.name == "determinism-batch")
    assert "--enable-deterministic-inference" in batch.summary
    assert report.passed
    assert report.server["enable_deterministic_inference"] is False


def test_batch_difference_with_deterministic_inference_fails() -> None:
    responder = brain.batch_variant(brain.healthy, same_for=OPTIONS.repeats)
    info = {"version": "0.5.23", "enable_deterministic_inference": True, "internal_states": []}
    report = run_sglang(responder, info)
    assert status(report)["determinism-batch"] == "fail"
    assert not report.passed


def test_failure_the_baseline_had_is_not_a_failure(tmp_path: Path) -> None:
    first = run(brain.answer_left_in_reasoning(brain.healthy))
    assert not first.passed
    baseline_file = tmp_path / "baseline.json"
    baseline_file.write_text(json.dumps(first.as_json()))
    baseline = load_baseline(baseline_file)
    again = run(brain.answer_left_in_reasoning(brain.healthy))
    apply_baseline(again, baseline, str(baseline_file))
    assert again.regressions == []
    assert again.known_failures == ["reasoning-split"]
    assert again.passed
    assert "known failures" in render_table(again) and "PASSED" in render_table(again)
    # a failure the baseline did not have still fails the check
    worse = run(brain.string_tool_arguments(brain.answer_left_in_reasoning(brain.healthy)))
    apply_baseline(worse, baseline, str(baseline_file))
    assert [r.split(":")[0] for r in worse.regressions] == ["tool-call"]
    assert not worse.passed
