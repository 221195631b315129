"""Model-call capacity shared by the runs of one evaluation.

Each run's engine may have at most ``slots - (calls the other runs have in flight)`` calls in
flight, so capacity is not a fixed share per problem: a run that reached its accepted quota
(and now only grades) or finished gives its slots back, and the runs still solving take them
at their next step. With ``by_need`` (as Nomos schedules a set: docs/bench-policy.md, "Priority
across a set"), free slots go first to the runs with the fewest accepted proofs: a run sees
the free slots less those that runs with fewer accepted proofs wanted and could not get.
Asyncio only; one event loop."""

from __future__ import annotations

import asyncio


class SharedCapacity:
    def __init__(self, slots: int, *, by_need: bool = False) -> None:
        if slots < 1:
            raise ValueError("capacity needs at least one slot")
        self.slots = slots
        self.by_need = by_need
        self._used: dict[int, int] = {}
        # holder -> (calls it planned that found no free slot, its accepted proofs)
        self._waiting: dict[int, tuple[int, int]] = {}
        self._changed = asyncio.Event()
        self.peak: dict[str, int] = {}  # holder label -> most calls it had in flight at once
        self.peak_total = 0  # most calls in flight at once, all holders together

    def free(self, holder: object | None = None) -> int:
        """Slots no run holds; for ``holder`` with ``by_need``, less those the runs with fewer
        accepted proofs are waiting for."""
        free = self.slots - sum(self._used.values())
        if not self.by_need or holder is None:
            return free
        _, mine = self._waiting.get(id(holder), (0, 0))
        ahead = sum(
            calls
            for other, (calls, accepted) in self._waiting.items()
            if other != id(holder) and accepted < mine
        )
        return free - ahead

    def wait(self, holder: object, calls: int, accepted: int) -> None:
        """``holder`` (with ``accepted`` proofs) planned ``calls`` it could not start for want
        of a slot (0: none waiting)."""
        before = self._waiting.get(id(holder), (0, 0))[0]
        self._waiting[id(holder)] = (calls, accepted)
        if calls < before:
            self._wake()  # runs behind it may take the slots it no longer waits for

    def set_used(self, holder: object, in_flight: int, label: str = "") -> None:
        before = self._used.get(id(holder), 0)
        self._used[id(holder)] = in_flight
        if label:
            self.peak[label] = max(self.peak.get(label, 0), in_flight)
        self.peak_total = max(self.peak_total, self.slots - self.free())
        if in_flight < before:
            self._wake()

    def release(self, holder: object) -> None:
        waited = self._waiting.pop(id(holder), (0, 0))[0]
        if self._used.pop(id(holder), 0) or waited:
            self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()  # later waiters wait for the next change

    async def changed(self) -> None:
        """Return at the next release of slots by anyone."""
        await self._changed.wait()
