"""The canary against the scripted fake endpoint: a healthy endpoint passes; long-output
corruption, nondeterminism and the known GLM stream bugs are caught; baselines compare."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from solver.errors import ConfigError, EndpointUnavailable
from solver.serve.canary import (
    CanaryOptions,
    CanaryReport,
    apply_baseline,
    compare,
    load_baseline,
    render_table,
    run_canary,
)
from solver.testing import fake_endpoint
from solver.testing.fake_endpoint import FakeEndpoint
from tests.serve import canary_brain as brain

OPTIONS = CanaryOptions(repeats=3, batch_sizes=(4,), chain_steps=300, timeout=60)


def run(responder: brain.Brain, context_length: int | None = 65_536) -> CanaryReport:
    with FakeEndpoint(responder, context_length=context_length) as fake:
        report = run_canary(fake.url, OPTIONS)
        assert fake.errors == []
    return report


def run_sglang(responder: brain.Brain, server_info: dict[str, Any]) -> CanaryReport:
    """As run(), with a /server_info answer as SGLang gives it (server arguments flattened)."""

    class Handler(fake_endpoint._Handler):
        def do_GET(self) -> None:
            if self.path == "/server_info":
                self._send_json(200, server_info)
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


def test_nondeterminism_is_caught() -> None:
    report = run(brain.nondeterministic(brain.healthy))
    got = status(report)
    assert got["determinism-repeat"] == "fail"
    assert got["determinism-batch"] == "fail"
    assert not report.passed


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
    info = {"version": "0.5.23", "enable_deterministic_inference": False}
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
    info = {"version": "0.5.23", "enable_deterministic_inference": True}
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
