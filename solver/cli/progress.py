"""Live progress of a run: a rich table on a terminal, or one JSON object per line.

Both read the folded state; neither writes anything to the run. The engine reports each call's
start, every streamed delta and its end; the JSON form turns the deltas into at most one
``call.progress`` line a second per call. The table shows what the search policy is doing
(``solver.report.search``): each candidate's verification so far, its stage, its best version
by pass rate, and the calls the policy cancelled.
"""

from __future__ import annotations

import json
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from solver.config import Settings
from solver.llm import RetryNotice
from solver.loop.engine import AttemptFailure
from solver.loop.policy import PolicyConfig
from solver.loop.state import CallState, RunState
from solver.records import Decision
from solver.report import SearchView, search_view
from solver.run import policy_config

# Seconds between two `call.progress` lines of one call: a 256k-token stream must not become
# 256k lines, and a call shorter than this gets none.
PROGRESS_INTERVAL_S = 1.0


@dataclass
class _Streaming:
    started: float
    role: str = ""
    candidate: str | None = None
    chars: int = 0
    deltas: int = 0  # stream deltas: one token each on SGLang, vLLM and llama.cpp
    reported: float = 0.0  # when the last call.progress line went out
    retry: RetryNotice | None = None  # the attempt that failed, while its retry waits
    retry_at: float = 0.0  # when the retry was announced

    def elapsed(self, now: float) -> float:
        return max(now - self.started, 1e-3)

    def rate(self, now: float) -> float:
        return self.deltas / self.elapsed(now)


@dataclass(frozen=True)
class Totals:
    """Where the run stands, as every progress line and the live table's title show it."""

    elapsed_s: float
    tokens: int
    calls: int
    accepted: int
    phase: str
    budget: dict[str, Any]  # wall_s, tokens, calls: the limits (None: unlimited)
    budget_left: dict[str, float | None]
    cancelled: int = 0  # calls the policy (or the run's end) cancelled

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class ProgressBase(ABC):
    def __init__(
        self,
        state: RunState,
        budget: dict[str, Any],
        elapsed: Callable[[], float],
        clock: Callable[[], float] = time.monotonic,
        policy: PolicyConfig | None = None,
    ):
        self.state = state
        self.budget = budget
        self.elapsed = elapsed
        self.clock = clock
        # the run's acceptance rules, for pass rates and stages as the policy counts them
        self.policy = policy or policy_config(Settings(), evaluation=False, material=True)
        self.streaming: dict[str, _Streaming] = {}
        self.failures: list[AttemptFailure] = []  # attempts that failed, retried or not

    def call_started(self, call: CallState) -> None:
        now = self.clock()
        self.streaming[call.call_id] = _Streaming(
            started=now, role=call.role, candidate=call.lineage, reported=now
        )
        self.refresh({"event": "call.started", "call": call.call_id, "role": call.role})

    def call_finished(self, call: CallState) -> None:
        self.streaming.pop(call.call_id, None)
        self.refresh({"event": "call.finished", "call": call.call_id, "status": call.status})

    def retrying(self, call_id: str, notice: RetryNotice) -> None:
        entry = self.streaming.get(call_id)
        if entry is not None:
            entry.retry, entry.retry_at = notice, self.clock()
        # behind a gateway, the worker the failed attempt went to (attempt_failed came first)
        last = self.failures[-1] if self.failures else None
        worker = last.worker if last and last.call_id == call_id else None
        self.refresh(
            {
                **({"worker": worker} if worker else {}),
                "event": "call.retrying",
                "call": call_id,
                "candidate": entry.candidate if entry else None,
                "role": entry.role if entry else None,
                "failed_attempt": notice.failed_attempt,
                "next_attempt": notice.failed_attempt + 1,
                "max_attempts": notice.max_attempts,
                "wait_s": round(notice.wait_s, 1),
                "error_kind": notice.error_kind,
                "error": notice.message,
            }
        )

    def streamed(self, call_id: str, chars: int) -> None:
        entry = self.streaming.get(call_id)
        if entry is not None:
            entry.retry = None  # the next attempt is streaming
            entry.chars += chars
            entry.deltas += 1
            self.tick()
            now = self.clock()
            if now - entry.reported >= PROGRESS_INTERVAL_S:
                entry.reported = now
                self.call_progress(call_id, entry, now)

    def call_progress(self, call_id: str, entry: _Streaming, now: float) -> None:  # noqa: B027
        """A throttled report on one streaming call; only the JSON form prints it."""

    def decided(self, decision: Decision) -> None:
        self.refresh({"event": "decision", **decision.data()})

    def attempt_failed(self, failure: AttemptFailure) -> None:
        """An attempt cut or refused (a worker behind a gateway died, a 5xx): kept for the
        status line, and its worker joins the ``call.retrying`` line that follows when the
        call is tried again (a call that is not ends in ``call.finished``)."""
        self.failures.append(failure)
        self.tick()

    def failures_text(self) -> str | None:
        """``2 attempts failed (last: L1.v0.verify.1 server_error on http://w1:30000)``."""
        if not self.failures:
            return None
        last = self.failures[-1]
        where = f" on {last.worker}" if last.worker else ""
        count = len(self.failures)
        noun = "attempt" if count == 1 else "attempts"
        return f"{count} {noun} failed (last: {last.call_id} {last.error_kind}{where})"

    def tick(self) -> None:  # noqa: B027 - an optional hook, empty by design
        """A cheap hook for streaming updates; subclasses redraw at their own pace."""

    @abstractmethod
    def refresh(self, event: dict[str, Any]) -> None: ...

    def totals(self) -> Totals:
        s = self.state
        elapsed = self.elapsed()
        used = {"wall_s": elapsed, "tokens": s.tokens_total, "calls": s.solve_calls()}
        left = {
            key: (round(limit - used[key], 1) if limit is not None else None)
            for key, limit in self.budget.items()
        }
        return Totals(
            elapsed_s=round(elapsed, 1),
            tokens=s.tokens_total,
            calls=len(s.calls),
            accepted=len(s.accepted()),
            phase=s.phase,
            budget=self.budget,
            budget_left=left,
            cancelled=sum(1 for c in s.calls.values() if c.status == "cancelled"),
        )

    def search(self) -> SearchView:
        return search_view(self.state, self.policy)


class JsonProgress(ProgressBase):
    """One JSON object per line on stdout (``--json``)."""

    def __init__(self, *args: Any, out: TextIO | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.out = out or sys.stdout

    def refresh(self, event: dict[str, Any]) -> None:
        line = json.dumps({**event, "totals": self.totals().to_json()}, sort_keys=True)
        self.out.write(line + "\n")
        self.out.flush()

    def call_progress(self, call_id: str, entry: _Streaming, now: float) -> None:
        self.refresh(
            {
                "event": "call.progress",
                "call": call_id,
                "candidate": entry.candidate,
                "role": entry.role,
                "tokens_streamed": entry.deltas,
                "chars_streamed": entry.chars,
                "tok_s": round(entry.rate(now), 1),
                "elapsed_s": round(entry.elapsed(now), 1),
            }
        )


class LiveProgress(ProgressBase):
    """A table per candidate: role in flight, verifications passed, the tokens it has used
    so far (calls ended, as the endpoint counted them, plus what its calls in flight have
    streamed), the speed of its calls in flight, and how long its oldest one has run."""

    def __init__(self, *args: Any, console: Console | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.console = console or Console(stderr=True)
        self.live = Live(console=self.console, refresh_per_second=4, transient=False)
        self._last_draw = 0.0

    def __enter__(self) -> LiveProgress:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.update(self._table())
        self.live.__exit__(None, None, None)
        if not self.console.is_terminal:
            # off a terminal Live leaves its last line open; what is printed next would join it
            self.console.line()

    def tick(self) -> None:
        now = self.clock()
        if now - self._last_draw > 0.25:
            self._last_draw = now
            self.live.update(self._table())

    def refresh(self, event: dict[str, Any]) -> None:
        self.live.update(self._table())

    def _table(self) -> Group:
        return Group(*self._status_lines(), self._candidates(), *self._other_calls())

    def _other_calls(self) -> list[Text]:
        """Calls in flight that belong to no candidate (the selector choosing among the
        accepted proofs, graders of the final proof): a line each under the table."""
        now = self.clock()
        lineages = set(self.state.lineages)
        lines = []
        for call in self.state.in_flight():
            if call.lineage in lineages:
                continue
            entry = self.streaming.get(call.call_id)
            what = f"in flight: {call.role} ({call.phase})"
            if entry is not None:
                what += f", {entry.deltas} tokens, {_duration(entry.elapsed(now))}"
                if entry.retry is not None:
                    what += f", {retry_text(entry.retry, entry.retry_at, now)}"
            lines.append(Text(what, overflow="fold"))
        return lines

    def _status_lines(self) -> list[Text]:
        """The run's totals above the table, packed into lines of the console's width. Off a
        terminal rich wraps a table's title at the table's width, which once left "budget
        left:" at the end of a line and its values on the next; here a part is never split
        from its label (a part wider than the console folds)."""
        t = self.totals()
        left = ", ".join(
            f"{BUDGET_LABELS.get(k, k)} {v}" for k, v in t.budget_left.items() if v is not None
        )
        # "budget left: none" read as "used up" when no budget had been set at all
        parts = [
            f"phase {t.phase}",
            f"{t.elapsed_s:.0f} s",
            f"{t.tokens} tokens",
            f"{t.calls} calls",
            f"accepted {t.accepted}",
            f"cancelled {t.cancelled}",
            f"budget left: {left}" if left else "no budget set",
            self.search().settings_text(),
        ]
        failed = self.failures_text()
        if failed:
            parts.append(failed)
        return [Text(line, overflow="fold") for line in pack(parts, self.console.width)]

    def _candidates(self) -> Table:
        s = self.state
        search = self.search()
        table = Table()
        columns = (
            "candidate",
            "version",
            "in flight",
            "verified",
            "stage",
            "best",
            "tokens",
            "tok/s",
            "elapsed",
        )
        for column in columns:
            table.add_column(column)
        now = self.clock()
        # Cumulative per candidate, so a row does not read 0 between calls or at the end.
        spent: dict[str | None, int] = {}
        for call in s.calls.values():
            spent[call.lineage] = spent.get(call.lineage, 0) + call.tokens
        for lineage in sorted(s.lineages.values(), key=lambda ln: ln.index):
            latest = lineage.latest
            version = latest.version if latest else 0
            flight = [c for c in s.in_flight() if c.lineage == lineage.lineage]
            entries = [self.streaming[c.call_id] for c in flight if c.call_id in self.streaming]
            tokens = spent.get(lineage.lineage, 0) + sum(e.deltas for e in entries)
            rate = sum(e.rate(now) for e in entries)
            running = max((e.elapsed(now) for e in entries), default=None)
            doing = sorted(
                {
                    f"{c.role} {retry_text(e.retry, e.retry_at, now)}"
                    if (e := self.streaming.get(c.call_id)) is not None and e.retry is not None
                    else c.role
                    for c in flight
                }
            )
            state = (
                "accepted"
                if lineage.accepted_version is not None
                else ("abandoned" if lineage.abandoned else ", ".join(doing))
            )
            here = search.of(lineage.lineage, version)
            best = search.best_of(lineage.lineage)
            table.add_row(
                lineage.lineage,
                f"v{version}",
                state or "-",
                here.rate_text() if here is not None else "-",
                here.stage if here is not None else "-",
                f"v{best.version} {best.rate_text()}" if best is not None else "-",
                str(tokens),
                f"{rate:.0f}",
                "-" if running is None else _duration(running),
            )
        return table


# How the view names each budget: the calls budget (budget.calls, --max-calls) counts the
# calls of the search only; grading and selection after it are not counted.
BUDGET_LABELS = {"wall_s": "wall_s", "tokens": "tokens", "calls": "search calls"}


def retry_text(notice: RetryNotice, announced: float, now: float) -> str:
    """``retry 2 of 6 in 4 s (http_status: HTTP 503 ...)``: what failed, and when the next
    attempt goes."""
    left = max(notice.wait_s - (now - announced), 0.0)
    return (
        f"retry {notice.failed_attempt + 1} of {notice.max_attempts} in {left:.0f} s "
        f"({notice.error_kind}: {notice.message[:80]})"
    )


def pack(parts: list[str], width: int, sep: str = " | ") -> list[str]:
    """``parts`` joined by ``sep`` into lines of at most ``width`` characters, breaking only
    between parts."""
    lines: list[str] = []
    line = ""
    for part in parts:
        joined = f"{line}{sep}{part}" if line else part
        if line and len(joined) > width:
            lines.append(line)
            line = part
        else:
            line = joined
    if line:
        lines.append(line)
    return lines


def _duration(seconds: float) -> str:
    """``42 s``, ``3m05s``, ``1h02m``: calls on a large model run for an hour or more."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
