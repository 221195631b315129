"""Virtual GPU time for the policy lab: tokens become wall time, in an instant of real time.

A call's work is its prefill (prompt tokens at ``prefill_tok_s``) plus its decode (completion
tokens at ``decode_tok_s``), both single-user rates. With ``c`` calls on the GPU every call
progresses ``slowdown(c) = 1 + (c - 1) / saturation`` times slower (processor sharing), so the
aggregate throughput ``c / slowdown(c)`` rises with concurrency and flattens past
``saturation``. A server that runs at most ``slots`` requests at once (SGLang's
``--max-running-requests``) queues the rest in order of arrival: a queued call waits, with
nothing prefilled or decoded, until a running one ends. Defaults and ranges:
docs/bench-policy.md.

The clock advances only when every call in flight is waiting for its response and the event
loop has nothing else to run (the engine is waiting too); then the call that finishes first is
released at its finish time. That makes the order of completions, and so every decision, a
pure function of the simulated model's answers, whatever carries the bytes. Calls still being
answered over HTTP hold the clock (``busy``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from solver.testing.fake_endpoint import RecordedRequest, Reply
from solver.wire import Usage

__all__ = ["GpuModel", "VirtualGpu"]

_SETTLE_TURNS = 8  # event-loop turns with nothing new before the clock may move


def _runnable(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether anything besides this ticker is ready to run. CPython's loops keep ready
    callbacks in ``_ready``; on a loop without it the settle turns alone must do."""
    ready = getattr(loop, "_ready", None)
    return bool(ready)


@dataclass(frozen=True)
class GpuModel:
    decode_tok_s: float = 50.0  # one user alone
    prefill_tok_s: float = 4_000.0
    saturation: float = 32.0
    slots: int = 0  # requests the server runs at once; 0: as many as arrive

    def slowdown(self, concurrent: int) -> float:
        return 1.0 + max(concurrent - 1, 0) / self.saturation


@dataclass
class _Job:
    prompt: int
    completion: int
    work: float  # seconds of single-user GPU time left
    total: float
    done: asyncio.Future[None]
    key: int
    started: bool = True  # on the GPU, not waiting for a slot


@dataclass
class VirtualGpu:
    model: GpuModel = field(default_factory=GpuModel)
    now: float = 0.0
    prefill_tokens: int = 0
    decode_tokens: int = 0
    cancelled_decode: int = 0
    busy: int = 0
    peak: int = 0
    # virtual seconds spent with n calls on the GPU (running or waiting for a slot), n >= 1
    occupancy: dict[int, float] = field(default_factory=dict)
    _jobs: dict[int, _Job] = field(default_factory=dict)
    # waits off the GPU (a tool's run): (the virtual time it ends, its future), by key
    _timers: dict[int, tuple[float, asyncio.Future[None]]] = field(default_factory=dict)
    _by_request: dict[int, _Job] = field(default_factory=dict)
    _next: int = 0
    _changes: int = 0
    _ticker: asyncio.Task[None] | None = None

    def clock(self, prior: float) -> Callable[[], float]:
        """A session's elapsed time (``Seams.clock``): earlier sessions plus virtual time."""
        return lambda: prior + self.now

    # ------------------------------------------------------------ the Pacer protocol

    async def hold(self, request: RecordedRequest, reply: Reply, tokens: tuple[int, int]) -> None:
        prompt, completion = tokens
        await self.hold_tokens(id(request), prompt, completion)

    def cut(self, request: RecordedRequest) -> Usage:
        job = self._by_request.pop(id(request), None)
        if job is None:
            return Usage()
        return self._cut(job)

    # ------------------------------------------------------------ scheduling

    async def hold_tokens(self, tag: int, prompt: int, completion: int) -> None:
        work = prompt / self.model.prefill_tok_s + completion / self.model.decode_tok_s
        self._next += 1
        job = _Job(
            prompt, completion, work, work, asyncio.get_running_loop().create_future(), self._next
        )
        self._jobs[job.key] = job
        job.started = any(j is job for j in self._running())
        self._by_request[tag] = job
        self.peak = max(self.peak, len(self._jobs))
        self._changes += 1
        self._kick()
        try:
            await job.done
        except asyncio.CancelledError:
            if job.key in self._jobs:
                self._jobs.pop(job.key)
                self._changes += 1
                self._promote()
            raise
        self._by_request.pop(tag, None)
        self.prefill_tokens += prompt
        self.decode_tokens += completion

    async def wait(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass for one caller, off the GPU (a tool running
        in the sandbox): the calls on the GPU progress meanwhile as they would without it."""
        self._next += 1
        key = self._next
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._timers[key] = (self.now + max(seconds, 0.0), done)
        self._changes += 1
        self._kick()
        try:
            await done
        finally:
            self._timers.pop(key, None)

    def _cut(self, job: _Job) -> Usage:
        """A call cancelled while on the GPU spent its prompt and what it decoded so far; one
        cancelled in the queue spent nothing."""
        if self._jobs.pop(job.key, None) is not None:
            self._promote()
        if not job.started:
            return Usage()
        done = 1.0 - job.work / job.total if job.total else 1.0
        prefill_share = (job.prompt / self.model.prefill_tok_s) / job.total if job.total else 0
        decoded = int(
            job.completion * max(0.0, (done - prefill_share) / max(1 - prefill_share, 1e-9))
        )
        self.prefill_tokens += job.prompt
        self.decode_tokens += decoded
        self.cancelled_decode += decoded
        return Usage(input_tokens=job.prompt, output_tokens=decoded)

    def _kick(self) -> None:
        if self._ticker is None or self._ticker.done():
            self._ticker = asyncio.get_running_loop().create_task(self._tick())

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while self._jobs or self._timers:
            seen = -1
            while seen != self._changes or self.busy or _runnable(loop):
                seen = self._changes
                if self.busy:
                    await asyncio.sleep(0.002)  # an HTTP call is being answered
                for _ in range(_SETTLE_TURNS):
                    await asyncio.sleep(0)
                if not self._jobs and not self._timers:
                    return
            self._advance()

    def _running(self) -> list[_Job]:
        """The calls on the GPU: all in flight, or the first ``slots`` to arrive."""
        live = [j for j in self._jobs.values() if not j.done.done()]
        return live[: self.model.slots] if self.model.slots > 0 else live

    def _promote(self) -> None:
        """A slot came free: the first queued calls take it."""
        for job in self._running():
            job.started = True

    def _advance(self) -> None:
        live = self._running()  # _jobs keeps arrival order; a queued call does no work
        if self._timers:
            key, (at, done) = min(self._timers.items(), key=lambda kv: (kv[1][0], kv[0]))
            if not live or at - self.now < min(j.work for j in live) * self.model.slowdown(
                len(live)
            ):
                self._ring(key, at, done, live)
                return
        if not live:
            return
        slow = self.model.slowdown(len(live))
        first = min(live, key=lambda j: (j.work, j.key))
        step = first.work
        self.now += step * slow
        held = len(self._jobs)
        self.occupancy[held] = self.occupancy.get(held, 0.0) + step * slow
        for job in live:
            job.work -= step
        del self._jobs[first.key]
        self._promote()
        self._changes += 1
        first.done.set_result(None)

    def _ring(self, key: int, at: float, done: asyncio.Future[None], live: list[_Job]) -> None:
        """A wait ends before any call on the GPU does: the clock moves to its end, and the
        calls on the GPU progress by that much."""
        step = max(at - self.now, 0.0)
        if live:
            slow = self.model.slowdown(len(live))
            held = len(self._jobs)
            self.occupancy[held] = self.occupancy.get(held, 0.0) + step
            for job in live:
                job.work -= step / slow
        self.now += step
        del self._timers[key]
        self._changes += 1
        if not done.done():
            done.set_result(None)
