"""Live progress: the rich table and the JSON lines show candidates, roles and budget left."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from solver.cli.progress import JsonProgress, LiveProgress
from solver.testing import FakeEndpoint
from tests.loop import scripts
from tests.loop.harness import ScriptedEndpoint, solve, state_of


def test_table_and_json_lines(tmp_path: Path) -> None:
    with FakeEndpoint(scripts.solved) as fake:
        outcome = solve(fake, tmp_path, candidates=2, budget__calls=40)
    state = state_of(outcome.run_dir)
    budget = {"wall_s": None, "tokens": None, "calls": 40}
    screen = io.StringIO()
    live = LiveProgress(
        state, budget, lambda: 12.0, console=Console(file=screen, width=160, force_terminal=False)
    )
    with live:
        live.refresh({"event": "tick"})
    text = screen.getvalue()
    assert "L0" in text and "L1" in text and "accepted" in text
    assert text.endswith("┘\n")  # the next line printed starts on a line of its own
    assert f"calls {40 - state.solve_calls()}" in text

    out = io.StringIO()
    progress = JsonProgress(state, budget, lambda: 3.0, out=out)
    progress.call_started(state.calls["L0.v0.generate"])
    progress.streamed("L0.v0.generate", 5)
    progress.call_finished(state.calls["L0.v0.generate"])
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["call.started", "call.finished"]
    assert lines[0]["totals"]["budget_left"]["calls"] == 40 - state.solve_calls()


def test_the_title_says_no_budget_set_rather_than_none_left(tmp_path: Path) -> None:
    with ScriptedEndpoint(scripts.solved) as fake:
        outcome = solve(fake, tmp_path, candidates=1)
    state = state_of(outcome.run_dir)
    screen = io.StringIO()
    console = Console(file=screen, width=200, force_terminal=False)
    unset = {"wall_s": None, "tokens": None, "calls": None}
    with LiveProgress(state, unset, lambda: 1.0, console=console) as live:
        live.refresh({"event": "tick"})
    text = screen.getvalue()
    assert "no budget set" in text and "budget left" not in text
