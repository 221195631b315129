"""Deadlines for one attempt without per-chunk timer churn.

The reading loop only stores the time of the last byte (:attr:`Watchdog.last`); one timer
checks it when a deadline could have passed and re-arms itself otherwise. The switch from the
first-byte phase to the idle phase re-arms it once (:meth:`Watchdog.body_started`). When a deadline
passes it cancels the reading task and remembers which deadline it was, so the attempt can
turn the cancellation into the right :class:`DeadlineExceeded`.
"""

from __future__ import annotations

import asyncio
import math

from solver.wire.types import Deadlines

__all__ = ["Watchdog"]


class Watchdog:
    __slots__ = (
        "_deadlines",
        "_first_byte_at",
        "_grace",
        "_handle",
        "_idle",
        "_loop",
        "_task",
        "_total_at",
        "fired",
        "last",
        "started",
    )

    def __init__(self, deadlines: Deadlines) -> None:
        self._loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("Watchdog needs a running task")
        self._task = task
        self._deadlines = deadlines
        self._idle = deadlines.idle
        self._grace = False
        self.started = self._loop.time()
        self.last: float | None = None  # time of the latest byte; None before the first
        self._first_byte_at = self.started + deadlines.first_byte
        total = deadlines.total
        self._total_at = self.started + total if total is not None else math.inf
        self.fired: str | None = None
        self._handle = self._loop.call_at(self._due(), self._check)

    def _due(self) -> float:
        if self.last is None:
            return min(self._first_byte_at, self._total_at)
        return min(self.last + self._idle, self._total_at)

    def _check(self) -> None:
        now = self._loop.time()
        due = self._due()
        if now < due:
            self._handle = self._loop.call_at(due, self._check)
            return
        if self._grace:
            self.fired = "grace"  # the answer is complete: silence now ends it, not fails it
        elif now >= self._total_at:
            self.fired = "total"
        else:
            self.fired = "first_byte" if self.last is None else "idle"
        self._task.cancel()

    def body_started(self) -> None:
        """The first body byte arrived: from now on the (shorter) idle deadline applies, so the
        timer armed for the first-byte deadline is moved earlier."""
        self.last = self._loop.time()
        self._handle.cancel()
        self._handle = self._loop.call_at(self._due(), self._check)

    def finish_seen(self, grace: float) -> None:
        """A finish reason arrived: only its usage tail and the end of the stream are still
        due, so from now on silence of ``grace`` seconds ends the stream (as ``grace``)."""
        if self._grace:
            return
        self._grace = True
        self._idle = min(self._idle, grace)
        self._handle.cancel()
        self._handle = self._loop.call_at(self._due(), self._check)

    def stop(self) -> None:
        self._handle.cancel()

    @property
    def due(self) -> float:
        """Loop time at which the current deadline passes (callers that keep a stream alive
        with pings stop pinging then)."""
        return self._due()

    def expire(self, reason: str) -> None:
        """End the attempt now for a reason of the caller's (a client that went away): the
        reading task is cancelled and :meth:`claim` returns ``reason``."""
        if self.fired is None:
            self.fired = reason
            self._handle.cancel()
            self._task.cancel()

    def claim(self) -> str | None:
        """After a CancelledError: the deadline that caused it, or None when the cancellation
        came from elsewhere (then it must propagate)."""
        fired, self.fired = self.fired, None  # claimed once: a second look sees no deadline
        if fired is None:
            return None
        if self._task.uncancel() > 0:
            return None
        return fired
