"""Live progress per call: elapsed time in the table, throttled `call.progress` JSON lines;
the search policy's stage, pass rates and cancelled calls; readable status lines off a terminal."""

from __future__ import annotations

import io
import json
import re

from rich.console import Console

from solver.cli.progress import JsonProgress, LiveProgress, pack
from solver.llm import RetryNotice
from solver.loop.policy import PolicyConfig
from solver.loop.state import CallState, LineageState, RunState, VersionState
from solver.records import VerificationFacts

BUDGET = {"wall_s": None, "tokens": None, "calls": None}


class Clock:
    """A hand-moved monotonic clock, so throttling is tested without sleeping."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _state() -> RunState:
    state = RunState()
    for index, lineage in enumerate(("L0", "L1")):
        state.lineages[lineage] = LineageState(lineage=lineage, index=index)
        call_id = f"{lineage}.v0.generate"
        state.calls[call_id] = CallState(
            call_id=call_id,
            role="generator",
            variant="direct",
            phase="solve",
            lineage=lineage,
            version=0,
            target=None,
            evaluation=False,
        )
    return state


def test_json_progress_lines_are_throttled_per_call() -> None:
    state, clock, out = _state(), Clock(), io.StringIO()
    progress = JsonProgress(state, BUDGET, lambda: 0.0, clock=clock, out=out)
    progress.call_started(state.calls["L0.v0.generate"])
    progress.call_started(state.calls["L1.v0.generate"])
    for _ in range(40):  # 40 deltas of L0 over 2.5 s (exact binary steps), 2 of L1
        clock.now += 0.0625
        progress.streamed("L0.v0.generate", 4)
    progress.streamed("L1.v0.generate", 4)
    progress.streamed("L1.v0.generate", 4)
    progress.call_finished(state.calls["L0.v0.generate"])
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    reports = [line for line in lines if line["event"] == "call.progress"]
    # One line a second for L0 (at 1.0 s and 2.0 s), one for L1 (first delta after 2.5 s).
    assert [(r["call"], r["tokens_streamed"]) for r in reports] == [
        ("L0.v0.generate", 16),
        ("L0.v0.generate", 32),
        ("L1.v0.generate", 1),
    ]
    first = reports[0]
    assert first["candidate"] == "L0" and first["role"] == "generator"
    assert first["chars_streamed"] == 64 and first["elapsed_s"] == 1.0
    assert first["tok_s"] == 16.0
    assert "totals" in first
    assert lines[-1]["event"] == "call.finished"


def test_a_call_shorter_than_the_interval_gets_no_progress_line() -> None:
    state, clock, out = _state(), Clock(), io.StringIO()
    progress = JsonProgress(state, BUDGET, lambda: 0.0, clock=clock, out=out)
    progress.call_started(state.calls["L0.v0.generate"])
    for _ in range(15):
        clock.now += 0.0625
        progress.streamed("L0.v0.generate", 1)
    progress.call_finished(state.calls["L0.v0.generate"])
    events = [json.loads(line)["event"] for line in out.getvalue().splitlines()]
    assert events == ["call.started", "call.finished"]


def test_the_table_shows_how_long_each_candidates_call_has_run() -> None:
    state, clock, screen = _state(), Clock(), io.StringIO()
    console = Console(file=screen, width=160, force_terminal=False)
    live = LiveProgress(state, BUDGET, lambda: 0.0, clock=clock, console=console)
    with live:
        live.call_started(state.calls["L0.v0.generate"])
        clock.now += 125.0
        live.call_started(state.calls["L1.v0.generate"])
        clock.now += 7.0
    text = screen.getvalue().splitlines()
    assert any("elapsed" in line for line in text)
    row = {line.split()[1]: line for line in text if line.split()[1:2] in (["L0"], ["L1"])}
    assert "2m12s" in row["L0"] and "7 s" in row["L1"]


def test_the_table_keeps_each_candidates_tokens_after_its_calls_end() -> None:
    state, clock, screen = _state(), Clock(), io.StringIO()
    console = Console(file=screen, width=160, force_terminal=False)
    live = LiveProgress(state, BUDGET, lambda: 0.0, clock=clock, console=console)
    with live:
        call = state.calls["L0.v0.generate"]
        live.call_started(call)
        for _ in range(5):
            live.streamed(call.call_id, 4)
        call.status, call.tokens = "completed", 1234  # what the endpoint's usage said
        live.call_finished(call)
        live.call_started(state.calls["L1.v0.generate"])
        live.streamed("L1.v0.generate", 4)
    lines = screen.getvalue().replace("┃", "│").splitlines()
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in lines]
    header = next(row for row in cells if "tok/s" in row)
    rows = {row[0]: row[header.index("tokens")] for row in cells if row[:1] in (["L0"], ["L1"])}
    assert rows["L0"] == "1234"  # ended: what the endpoint counted, not 0
    assert rows["L1"] == "1"  # in flight: what it has streamed


def _staged_state(passes: int, cancelled: int) -> RunState:
    """L0 v0 with ``passes`` passing verifications of the first stage (of K = 5, 2 first),
    then ``cancelled`` cancelled ones."""
    state = RunState()
    lineage = LineageState(lineage="L0", index=0)
    lineage.versions[0] = VersionState("L0", 0, "L0.v0.generate", None, "art-0")
    state.lineages["L0"] = lineage
    for n in range(passes + cancelled):
        call = CallState(
            call_id=f"L0.v0.verify.{n}",
            role="verifier",
            variant="default",
            phase="solve",
            lineage="L0",
            version=0,
            target=None,
            evaluation=False,
            status="completed" if n < passes else "cancelled",
            parsed_ok=n < passes,
        )
        if n < passes:
            call.facts = VerificationFacts(verdict="pass", findings=())
        state.calls[call.call_id] = call
    return state


def _cells(text: str) -> tuple[list[str], dict[str, list[str]]]:
    lines = text.replace("┃", "│").splitlines()
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in lines]
    header = next(row for row in cells if "stage" in row)
    return header, {row[0]: row for row in cells if row[:1] == ["L0"]}


def test_the_table_shows_the_stage_of_verification_and_cancelled_calls() -> None:
    policy = PolicyConfig(verifications=5, verify_stage=2, best_version=True)
    for passes, stage in ((1, "first 2 of 5"), (2, "rest 3 of 5")):
        screen = io.StringIO()
        console = Console(file=screen, width=160, force_terminal=False)
        state = _staged_state(passes, cancelled=1)
        with LiveProgress(state, BUDGET, lambda: 0.0, console=console, policy=policy) as live:
            live.refresh({"event": "tick"})
        text = screen.getvalue()
        header, rows = _cells(text)
        assert rows["L0"][header.index("stage")] == stage
        assert rows["L0"][header.index("verified")] == f"{passes}/{passes} (100%)"
        assert rows["L0"][header.index("best")] == f"v0 {passes}/{passes} (100%)"
        assert "cancelled 1" in text
        assert "staged verification: 2 first, the other 3 if all pass" in text


def test_off_a_terminal_no_label_is_left_without_its_value() -> None:
    """A narrow console off a terminal once showed "budget left:" at a line's end, its values
    on the next line (rich wraps a table title at the table's width)."""
    budget = {"wall_s": 3600.0, "tokens": 4_000_000, "calls": 200}
    for width in (40, 60, 80):
        screen = io.StringIO()
        console = Console(file=screen, width=width, force_terminal=False)
        with LiveProgress(_state(), budget, lambda: 12.0, console=console) as live:
            live.refresh({"event": "tick"})
        text = screen.getvalue()
        flat = " ".join(line.strip() for line in text.splitlines())
        assert re.search(r"budget left: wall_s 3588\.0, tokens 4000000, search calls \d+", flat)
        for line in text.splitlines():
            assert not line.rstrip().endswith(("budget left:", "|")), (width, line)
        assert "budget left: wall_s" in text  # the label and its first value on one line


def test_pack_breaks_only_between_parts() -> None:
    assert pack(["a b", "c d", "e"], 7) == ["a b", "c d | e"]
    assert pack(["longer than the width"], 5) == ["longer than the width"]
    assert pack([], 10) == []


NOTICE = RetryNotice(
    failed_attempt=2, max_attempts=6, wait_s=8.0, error_kind="http_status", message="HTTP 503"
)


def test_a_retry_in_progress_is_a_json_event() -> None:
    state, clock, out = _state(), Clock(), io.StringIO()
    progress = JsonProgress(state, BUDGET, lambda: 0.0, clock=clock, out=out)
    progress.call_started(state.calls["L0.v0.generate"])
    progress.retrying("L0.v0.generate", NOTICE)
    event = json.loads(out.getvalue().splitlines()[-1])
    assert event["event"] == "call.retrying"
    assert (event["candidate"], event["role"]) == ("L0", "generator")
    assert (event["failed_attempt"], event["next_attempt"], event["max_attempts"]) == (2, 3, 6)
    assert event["wait_s"] == 8.0 and event["error"] == "HTTP 503"


def test_the_table_shows_a_retry_until_the_next_attempt_streams() -> None:
    state, clock, screen = _state(), Clock(), io.StringIO()
    console = Console(file=screen, width=200, force_terminal=False)
    live = LiveProgress(state, BUDGET, lambda: 0.0, clock=clock, console=console)
    live.call_started(state.calls["L0.v0.generate"])
    live.retrying("L0.v0.generate", NOTICE)
    clock.now += 3.0
    console.print(live._table())
    flat = " ".join(screen.getvalue().split())
    assert "generator retry 3 of 6 in 5 s (http_status: HTTP 503)" in flat
    live.streamed("L0.v0.generate", 4)
    screen.truncate(0)
    console.print(live._table())
    assert "retry" not in screen.getvalue()


def test_a_call_of_no_candidate_shows_under_the_table() -> None:
    """The selector choosing among accepted proofs has no candidate row: it has a line."""
    state, clock, screen = _state(), Clock(), io.StringIO()
    state.calls["select"] = CallState(
        call_id="select",
        role="selector",
        variant="default",
        phase="select",
        lineage=None,
        version=None,
        target=None,
        evaluation=False,
    )
    console = Console(file=screen, width=160, force_terminal=False)
    live = LiveProgress(state, BUDGET, lambda: 0.0, clock=clock, console=console)
    with live:
        live.call_started(state.calls["select"])
        for _ in range(3):
            live.streamed("select", 4)
        clock.now += 14.0
    assert "in flight: selector (select), 3 tokens, 14 s" in screen.getvalue()
