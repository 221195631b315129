"""The run at a glance, as an inline SVG: one lane per lineage with its calls as bars over time
(overlapping calls stacked within the lane), a lane for the calls of no lineage (selection,
evaluation grading), and under it the tokens the run has used so far. For a run of hours this
is what people look at first; every bar and point carries its numbers as a tooltip."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from solver._util.clock import seconds_between
from solver.report.model import CallView, RunReport

WIDTH = 1100
LEFT = 120  # lane labels
RIGHT = 12
BAR = 8  # height of one bar
GAP = 2
LANE_PAD = 6
TOKENS_HEIGHT = 110
OTHER_LANE = "other calls"


@dataclass(frozen=True)
class Bar:
    call: CallView
    start: float  # seconds from the run's first event
    end: float
    level: int = 0  # sub-row within its lane


def _e(value: object) -> str:
    return html.escape(str(value))


def _fmt_s(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _fmt_tokens(tokens: float) -> str:
    if tokens >= 1_000_000:
        return f"{tokens / 1_000_000:.1f}M"
    if tokens >= 1000:
        return f"{tokens / 1000:.0f}k"
    return f"{tokens:.0f}"


def stack(bars: Sequence[Bar]) -> list[Bar]:
    """Each bar on the first level of its lane that is free at its start."""
    ends: list[float] = []
    placed: list[Bar] = []
    for bar in sorted(bars, key=lambda b: (b.start, b.end)):
        level = next((i for i, end in enumerate(ends) if end <= bar.start), len(ends))
        if level == len(ends):
            ends.append(bar.end)
        else:
            ends[level] = bar.end
        placed.append(Bar(bar.call, bar.start, bar.end, level))
    return placed


def lanes(report: RunReport) -> tuple[dict[str, list[Bar]], float]:
    """Lane name -> its stacked bars, and the run's span in seconds."""
    if not report.timeline:
        return {}, 0.0
    origin = report.timeline[0].t
    last = max(e.offset_s for e in report.timeline)
    found: dict[str, list[Bar]] = {}
    order = [ln.lineage for ln in report.lineages]
    for call in report.calls:
        if call.started_t is None:
            continue
        start = seconds_between(origin, call.started_t)
        end = seconds_between(origin, call.ended_t) if call.ended_t else max(last, start)
        lane = call.lineage if call.lineage in order and call.phase != "evaluate" else OTHER_LANE
        found.setdefault(lane, []).append(Bar(call, start, max(end, start)))
    span = max([last, *(b.end for bars in found.values() for b in bars), 1e-3])
    ordered = {name: stack(found[name]) for name in [*order, OTHER_LANE] if name in found}
    return ordered, span


def token_points(report: RunReport) -> list[tuple[float, int]]:
    """(seconds, tokens used so far) at the end of each call that ended."""
    if not report.timeline:
        return []
    origin = report.timeline[0].t
    ended = sorted(
        (seconds_between(origin, c.ended_t), c.tokens + c.reasoning_tokens)
        for c in report.calls
        if c.ended_t is not None
    )
    points: list[tuple[float, int]] = [(0.0, 0)]
    total = 0
    for at, tokens in ended:
        total += tokens
        points.append((at, total))
    return points


def timeline_svg(report: RunReport, colour: Callable[[str], str]) -> str:
    """The picture, or a sentence when no call has started."""
    by_lane, span = lanes(report)
    if not by_lane:
        return "<p>No call has started yet.</p>"
    scale = (WIDTH - LEFT - RIGHT) / span
    heights = {
        name: (max(b.level for b in bars) + 1) * (BAR + GAP) for name, bars in by_lane.items()
    }
    lanes_height = sum(h + 2 * LANE_PAD for h in heights.values())
    top = 22
    tokens_top = top + lanes_height + 26
    height = tokens_top + TOKENS_HEIGHT + 24
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'width="100%" role="img" aria-label="calls per lineage and tokens over time" '
        f'class="lanes">'
    ]
    for quarter in range(5):  # a shared time axis: 0, 1/4, 1/2, 3/4 and the end
        x = LEFT + quarter * span / 4 * scale
        anchor = "end" if quarter == 4 else "start"
        parts.append(
            f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{height - 20}" stroke="#e3e6ea"/>'
            f'<text x="{x:.1f}" y="{top - 9}" text-anchor="{anchor}">'
            f"{_e(_fmt_s(quarter * span / 4))}</text>"
        )
    y = top
    for name, bars in by_lane.items():
        lane_h = heights[name] + 2 * LANE_PAD
        parts.append(
            f'<rect x="0" y="{y}" width="{WIDTH}" height="{lane_h}" fill="#f6f7f9" '
            f'opacity="{0.9 if list(by_lane).index(name) % 2 else 0.0}"/>'
            f'<text x="4" y="{y + lane_h / 2 + 4:.1f}">{_e(name)}</text>'
        )
        for bar in bars:
            by = y + LANE_PAD + bar.level * (BAR + GAP)
            call = bar.call
            tip = (
                f"{call.call_id} ({call.role}) {_fmt_s(bar.end - bar.start)}, "
                f"{call.tokens} tok: {call.summary}"
            )
            parts.append(
                f'<rect x="{LEFT + bar.start * scale:.1f}" y="{by}" '
                f'width="{max((bar.end - bar.start) * scale, 1.5):.1f}" height="{BAR}" '
                f'fill="{colour(call.role)}"><title>{_e(tip)}</title></rect>'
            )
        y += lane_h
    points = token_points(report)
    most = max((p[1] for p in points), default=0) or 1
    base = tokens_top + TOKENS_HEIGHT

    def xy(at: float, tokens: int) -> str:
        return f"{LEFT + at * scale:.1f},{base - tokens * TOKENS_HEIGHT / most:.1f}"

    path = " ".join(f"{'M' if i == 0 else 'L'}{xy(*point)}" for i, point in enumerate(points))
    parts.append(
        f'<text x="4" y="{tokens_top + 10}">tokens used</text>'
        f'<text x="4" y="{tokens_top + 24}" class="muted">{_e(_fmt_tokens(most))} in all</text>'
        f'<line x1="{LEFT}" y1="{base}" x2="{WIDTH - RIGHT}" y2="{base}" stroke="#999"/>'
        f'<path d="{path}" fill="none" stroke="#3b7dd8" stroke-width="1.6"/>'
    )
    for at, tokens in points[1:]:
        cx, cy = xy(at, tokens).split(",")
        parts.append(
            f'<circle cx="{cx}" cy="{cy}" r="1.8" fill="#3b7dd8">'
            f"<title>{_e(_fmt_s(at))}: {tokens} tokens</title></circle>"
        )
    parts.append("</svg>")
    return "".join(parts)
