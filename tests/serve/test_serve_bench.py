"""The benchmark's arithmetic exactly on known token times; live, against a fake that streams at
a set rate, measured tok/s close to what the fake really sent."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from solver.cli.serve import group
from solver.errors import InputError
from solver.serve.bench import (
    BenchOptions,
    LevelResult,
    RequestRecord,
    level_warnings,
    load_dataset,
    percentile,
    record_of,
    render_table,
    run_bench,
    summarize,
    summary_json,
)
from solver.serve.stream import StreamResult
from solver.testing import FakeEndpoint
from solver.testing.fake_endpoint import Fault, Reply
from solver.testing.fake_sglang import FakeSGLang

ROOT = Path(__file__).resolve().parents[2]
RATE = 50.0  # tokens per second per stream
TOKENS = 100  # a 2 s span per response
# Live, the client reads each token a little after the fake wrote it; on a loaded 2-core CI
# machine that jitter reaches a few percent in the tails. The exact arithmetic is checked
# on fixed times below, so the live check only needs to catch a wrong clock or a lost stream.
LIVE_TOLERANCE = 0.05


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def fake_process(rate: float, tokens: int, record: Path) -> Iterator[str]:
    """The paced fake in its own process, so it does not share a GIL with the measuring client."""
    port = free_port()
    cmd = [sys.executable, "-m", "solver.testing.fake_sglang", "--port", str(port)]
    cmd += ["--rate", str(rate), "--tokens", str(tokens), "--record", str(record)]
    proc = subprocess.Popen(
        cmd, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith(b"READY")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.serial  # measured rates: no other worker may share the cores meanwhile
@pytest.mark.parametrize("concurrency", [1, 4])
def test_per_user_and_total_throughput_match_the_set_rate(tmp_path: Path, concurrency: int) -> None:
    record = tmp_path / "sent.jsonl"
    items = load_dataset(None, TOKENS)
    options = BenchOptions(concurrency=(concurrency,), duration=4.0, grace=10)
    with fake_process(RATE, TOKENS, record) as url:
        (level,) = run_bench([url], items, options)
    assert level.failed == 0 and level.cancelled == 0 and level.completed >= concurrency
    assert level.output_tokens == level.completed * TOKENS
    # 1. what the client measured agrees with what the server really sent
    sent = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(sent) == level.completed
    true_rates = [(s["tokens"] - 1) / (s["last"] - s["first"]) for s in sent]
    for q in ("p10", "p50", "p90"):
        measured, truth = level.per_user_tok_s[q], percentile(true_rates, float(q[1:]))
        assert measured is not None and truth is not None
        assert abs(measured - truth) / truth < LIVE_TOLERANCE, (q, measured, truth)
    # 2. and the median is the set rate (the fake keeps an absolute schedule)
    median = level.per_user_tok_s["p50"]
    assert median is not None and abs(median - RATE) / RATE < LIVE_TOLERANCE, median
    # total: C streams at RATE, less the gaps between requests and the drain at the end
    ceiling = concurrency * RATE
    assert 0.6 * ceiling < level.total_output_tok_s < 1.02 * ceiling


def test_per_user_rate_is_tokens_after_the_first_over_the_span_they_took() -> None:
    """The first token's arrival starts the clock, so N tokens give N - 1 intervals."""
    times = [1.0 + i * 0.02 for i in range(100)]  # 50 tok/s after a 1 s wait for the first
    result = StreamResult(
        finish_reason="stop", started=0.0, first_token=times[0], ended=times[-1] + 0.01,
        token_times=times,
    )  # fmt: skip
    record = record_of(result)
    assert record.per_user == pytest.approx(50.0)
    assert record.ttft == pytest.approx(1.0)
    # with usage, the server's count replaces the chunk count (a chunk may carry two tokens)
    result.usage = {"completion_tokens": 199}
    assert record_of(result).per_user == pytest.approx(100.0)
    # a single token, or a failed stream, has no per-user rate
    assert record_of(StreamResult(finish_reason="stop", token_times=[1.0])).per_user is None
    failed = StreamResult(error="reset", first_token=1.0, token_times=times)
    assert record_of(failed).per_user is None and record_of(failed).error == "reset"
    # percentiles over records: the levels' p10/p50/p90 are of per-request rates
    records = [
        RequestRecord(0.0, 0.1, 2.0, 11, rate, None, True, (0.1, 2.0)) for rate in (10, 20, 30)
    ]
    level = summarize("http://127.0.0.1:1", 3, records, cancelled=0)
    assert level.per_user_tok_s == {"p10": 12.0, "p50": 20.0, "p90": 28.0, "mean": 20.0}


@pytest.mark.serial
def test_two_endpoints_side_by_side_ratio(tmp_path: Path) -> None:
    items = load_dataset(None, 40)
    options = BenchOptions(concurrency=(2,), duration=2.0, grace=10)
    with (
        fake_process(100, 40, tmp_path / "a.jsonl") as slow,
        fake_process(200, 40, tmp_path / "b.jsonl") as fast,
    ):
        results = run_bench([slow, fast], items, options)
    assert [r.endpoint for r in results] == [slow, fast]
    (ratio,) = summary_json(results, options)["ratios_second_over_first"]
    # The stand-ins pace tokens at 100 and 200 tok/s; a loaded machine stretches the slow
    # tail a little, so the check is for the right ratio, not a stopwatch.
    assert abs(ratio["p90_per_user_tok_s"] - 2.0) < 0.25
    assert 1.3 < ratio["total_output_tok_s"] < 2.2


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


def test_a_level_where_nothing_completes_fails(tmp_path: Path) -> None:
    # 2 tokens a second and 64 to send: every request is still running when the level ends
    with FakeSGLang(rate=2, tokens=64) as fake:
        args = ["bench", "--endpoint", fake.url, "--concurrency", "2", "--duration", "0.3"]
        args += ["--grace", "0.2", "--max-tokens", "64"]
        result = CliRunner().invoke(group, args)
        url = fake.url
    assert result.exit_code == 1, result.output
    # each level says when it starts, so a 900 s level is not silent
    assert f"bench: {url} c2: started, 0.3 s" in result.stderr
    assert "no request completed" in result.stderr
    assert "warning: E1 c2: no request completed" in result.stdout


def test_mostly_cancelled_level_is_flagged() -> None:
    def level(completed: int, cancelled: int) -> LevelResult:
        return LevelResult(
            "http://e", 4, 1.0, completed, 0, cancelled, 10, 10.0,
            {"p90": 1.0, "p50": 1.0, "p10": 1.0}, {"p50": 1.0, "p99": 1.0},
        )  # fmt: skip

    assert "3 of 4 requests were cancelled" in render_table([level(1, 3)])
    assert "warning" not in render_table([level(3, 1)])


def test_missing_usage_is_warned_and_the_drain_tail_is_outside_the_window() -> None:
    # 10 tokens inside the 0..1 s window, 10 more after it (the drain tail)
    times = tuple(i * 0.1 for i in range(20))
    record = RequestRecord(0.0, 0.0, 1.9, 20, 10.0, None, False, times)
    level = summarize("http://127.0.0.1:1", 1, [record], cancelled=0, window=(0.0, 0.95))
    assert level.total_output_tok_s == pytest.approx(10 / 0.95)
    assert level.without_usage == 1
    (warning,) = level_warnings([level])
    assert "no usage" in warning and "accept length" in warning


def test_requests_get_distinct_prompts_unless_asked_not_to() -> None:
    from solver.serve.bench import _distinct

    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
    first, second = _distinct(messages, 1), _distinct(messages, 2)
    assert first[1]["content"] != second[1]["content"] and first[1]["content"].endswith("q")
    assert first[0] == messages[0] and messages[1]["content"] == "q"


def test_a_thinking_budget_runs_each_endpoint_twice_side_by_side() -> None:
    """With a budget each level runs the endpoint as it is, then with the budget in SGLang's
    fields (what solve sends): the second shortens the reasoning, and the summary's ratio is
    the budgeted run over the plain one."""
    items = load_dataset(None, 200)
    options = BenchOptions(concurrency=(1,), duration=0.5, grace=10, thinking_budget=10)
    with FakeSGLang(rate=2000, tokens=4, reasoning_tokens=50) as fake:
        results = run_bench([fake.url], items, options)
        bodies = list(fake.bodies)
    plain, budgeted = results
    assert plain.endpoint == fake.url
    assert budgeted.endpoint == f"{fake.url} (thinking budget 10)"
    with_budget = [b for b in bodies if "custom_params" in b]
    assert with_budget and len(with_budget) < len(bodies)
    assert all(b["custom_params"] == {"thinking_budget": 10} for b in with_budget)
    assert all(json.loads(b["custom_logit_processor"])["callable"] for b in with_budget)
    # the fake forces the answer after 10 tokens of reasoning instead of 50
    assert plain.output_tokens / plain.completed > budgeted.output_tokens / budgeted.completed
    summary = summary_json(results, options)
    assert summary["endpoints"] == [plain.endpoint, budgeted.endpoint]
    (ratio,) = summary["ratios_second_over_first"]
    assert ratio["concurrency"] == 1 and ratio["total_output_tok_s"] > 0


def test_the_cli_names_the_budgeted_run_beside_the_plain_one() -> None:
    with FakeSGLang(rate=2000, tokens=4, reasoning_tokens=20) as fake:
        args = ["bench", "--endpoint", fake.url, "--concurrency", "1", "--duration", "0.3"]
        result = CliRunner().invoke(group, [*args, "--thinking-budget", "8", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout[result.stdout.index("{") :])
    assert summary["endpoints"] == [fake.url, f"{fake.url} (thinking budget 8)"]
