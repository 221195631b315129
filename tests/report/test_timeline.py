"""The timeline picture: a lane per lineage, overlapping calls stacked, tokens over time."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from solver.report import (
    OTHER_LANE,
    Bar,
    CallView,
    lanes,
    load_report,
    render_html,
    stack,
    timeline_svg,
    token_points,
)


def _call(call_id: str) -> CallView:
    return CallView(
        seq=0,
        call_id=call_id,
        role="verifier",
        variant="v",
        phase="solve",
        lineage="L0",
        version=0,
        target=None,
        evaluation=False,
        planned_t="2026-01-01T00:00:00Z",
    )


def test_overlapping_calls_stack_and_later_ones_reuse_a_free_row() -> None:
    bars = [Bar(_call("a"), 0, 10), Bar(_call("b"), 2, 5), Bar(_call("c"), 6, 8)]
    levels = {b.call.call_id: b.level for b in stack(bars)}
    assert levels == {"a": 0, "b": 1, "c": 1}


def test_lanes_follow_the_lineages_and_tokens_only_grow(finished_run: Path) -> None:
    report = load_report(finished_run)
    by_lane, span = lanes(report)
    assert list(by_lane)[: len(report.lineages)] == [ln.lineage for ln in report.lineages]
    assert OTHER_LANE in by_lane  # selection and the evaluation graders
    assert {b.call.phase for b in by_lane[OTHER_LANE]} >= {"evaluate"}
    placed = sum(len(bars) for bars in by_lane.values())
    assert placed == sum(1 for c in report.calls if c.started_t is not None)
    assert all(0 <= b.start <= b.end <= span for bars in by_lane.values() for b in bars)
    points = token_points(report)
    totals = [tokens for _, tokens in points]
    assert totals == sorted(totals) and totals[-1] == sum(
        c.tokens + c.reasoning_tokens for c in report.calls if c.ended_t is not None
    )


def test_the_html_report_draws_lanes_and_the_token_curve(finished_run: Path) -> None:
    report = load_report(finished_run)
    page = render_html(report)
    svg = re.search(r'<svg [^>]*aria-label="calls per lineage and tokens over time".*?</svg>', page)
    assert svg is not None
    for lineage in report.lineages:
        assert f">{lineage.lineage}</text>" in svg.group(0)
    assert "tokens used" in svg.group(0) and '<path d="M' in svg.group(0)
    assert svg.group(0).count("<rect") >= len(report.calls)


def test_no_call_yet_is_said(finished_run: Path) -> None:
    empty = replace(load_report(finished_run), calls=())
    assert timeline_svg(empty, lambda role: "#000") == "<p>No call has started yet.</p>"
