"""Model-call capacity shared by the runs of one evaluation.

Each run's engine may have at most ``slots - (calls the other runs have in flight)`` calls in
flight, so capacity is not a fixed share per problem: a run that reached its accepted quota
(and now only grades) or finished gives its slots back, and the runs still solving take them
at their next step. Asyncio only; one event loop."""

from __future__ import annotations

import asyncio


class SharedCapacity:
    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError("capacity needs at least one slot")
        self.slots = slots
        self._used: dict[int, int] = {}
        self._changed = asyncio.Event()
        self.peak: dict[str, int] = {}  # holder label -> most calls it had in flight at once
        self.peak_total = 0  # most calls in flight at once, all holders together

    def free(self) -> int:
        return self.slots - sum(self._used.values())

    def set_used(self, holder: object, in_flight: int, label: str = "") -> None:
        before = self._used.get(id(holder), 0)
        self._used[id(holder)] = in_flight
        if label:
            self.peak[label] = max(self.peak.get(label, 0), in_flight)
        self.peak_total = max(self.peak_total, self.slots - self.free())
        if in_flight < before:
            self._wake()

    def release(self, holder: object) -> None:
        if self._used.pop(id(holder), 0):
            self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()  # later waiters wait for the next change

    async def changed(self) -> None:
        """Return at the next release of slots by anyone."""
        await self._changed.wait()
