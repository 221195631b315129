"""The benchmark against a fake that streams at a set rate: measured tok/s within 2% of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from serve.bench import BenchOptions, load_dataset, percentile, run_bench, summary_json
from solver.commands.serve import group
from solver.errors import InputError
from tests.fakes.fake_endpoint import FakeEndpoint, Fault, Reply
from tests.serve.fake_sglang import FakeSGLang

RATE = 100.0  # tokens per second per stream
TOKENS = 40


def test_per_user_and_total_throughput_match_the_set_rate() -> None:
    items = load_dataset(None, TOKENS)
    options = BenchOptions(concurrency=(1, 4), duration=1.5, grace=10)
    with FakeSGLang(rate=RATE, tokens=TOKENS) as fake:
        results = run_bench([fake.url], items, options)
    for level in results:
        assert level.failed == 0 and level.cancelled == 0 and level.completed >= level.concurrency
        for q in ("p10", "p50", "p90"):
            measured = level.per_user_tok_s[q]
            assert measured is not None
            assert abs(measured - RATE) / RATE < 0.02, (level.concurrency, q, measured)
        # total: C streams at RATE, less the gaps between requests
        ceiling = level.concurrency * RATE
        assert 0.85 * ceiling < level.total_output_tok_s < 1.02 * ceiling
        assert level.output_tokens == level.completed * TOKENS


def test_two_endpoints_side_by_side_ratio(tmp_path: Path) -> None:
    items = load_dataset(None, TOKENS)
    options = BenchOptions(concurrency=(2,), duration=1.0, grace=10)
    with (
        FakeSGLang(rate=RATE, tokens=TOKENS) as slow,
        FakeSGLang(rate=2 * RATE, tokens=TOKENS) as fast,
    ):
        results = run_bench([slow.url, fast.url], items, options)
    summary = summary_json(results, options)
    (ratio,) = summary["ratios_second_over_first"]
    assert abs(ratio["p90_per_user_tok_s"] - 2.0) < 0.08
    assert 1.7 < ratio["total_output_tok_s"] < 2.2


def test_cli_writes_json_and_plot(tmp_path: Path) -> None:
    dataset = tmp_path / "d.jsonl"
    dataset.write_text(
        json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 20}) + "\n"
        + json.dumps({"prompt": "prove it"}) + "\n"
    )  # fmt: skip
    out, png = tmp_path / "s.json", tmp_path / "p.png"
    with FakeSGLang(rate=400, tokens=20) as fake:
        args = ["bench", "--endpoint", fake.url, "--concurrency", "1,2", "--duration", "0.5"]
        args += ["--dataset", str(dataset), "--max-tokens", "10"]
        args += ["--out", str(out), "--plot", str(png)]
        result = CliRunner().invoke(group, args)
    assert result.exit_code == 0, result.output
    assert "total tok/s" in result.stdout
    summary = json.loads(out.read_text())
    assert [lv["concurrency"] for lv in summary["levels"]] == [1, 2]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_percentile_matches_linear_interpolation() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([10, 20, 30, 40, 50], 90) == pytest.approx(46.0)
    assert percentile([], 90) is None


def test_bad_dataset(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"nothing": 1}\n')
    with pytest.raises(InputError, match=r"bad\.jsonl:1"):
        load_dataset(bad, 10)
    with pytest.raises(InputError):
        load_dataset(tmp_path / "missing.jsonl", 10)


def test_failed_requests_are_counted() -> None:
    items = load_dataset(None, 10)
    options = BenchOptions(concurrency=(2,), duration=0.3, grace=5)
    with FakeEndpoint(lambda request: Reply(fault=Fault(status=500))) as fake:
        (level,) = run_bench([fake.url], items, options)
    assert level.completed == 0 and level.failed >= 2
    assert level.errors and "HTTP 500" in level.errors[0]
    assert level.total_output_tok_s == 0.0
