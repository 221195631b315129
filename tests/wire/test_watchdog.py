"""The attempt watchdog shared by the model client and the proxy: which deadline fired, the
caller's own reason (a client gone), and cancellations that are not the watchdog's."""

from __future__ import annotations

import asyncio

import pytest

from solver.wire import Deadlines, Watchdog


async def _claim_after(watch: Watchdog, seconds: float) -> str | None:
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        return watch.claim()
    return "no deadline fired"


def test_the_first_byte_then_the_idle_deadline() -> None:
    async def main() -> None:
        watch = Watchdog(Deadlines(first_byte=0.02, idle=30))
        assert await _claim_after(watch, 5) == "first_byte"
        watch = Watchdog(Deadlines(first_byte=30, idle=0.02))
        watch.body_started()
        assert await _claim_after(watch, 5) == "idle"
        watch.stop()

    asyncio.run(main())


def test_after_a_finish_silence_is_the_grace() -> None:
    async def main() -> None:
        watch = Watchdog(Deadlines(first_byte=30, idle=30))
        watch.body_started()
        watch.finish_seen(0.02)
        assert watch.due - asyncio.get_running_loop().time() <= 0.02
        assert await _claim_after(watch, 5) == "grace"

    asyncio.run(main())


def test_expire_gives_the_callers_reason_once() -> None:
    async def main() -> None:
        watch = Watchdog(Deadlines(first_byte=30, idle=30))
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, watch.expire, "client_cancel")
        loop.call_later(0.02, watch.expire, "ignored: already fired")
        assert await _claim_after(watch, 5) == "client_cancel"
        assert watch.claim() is None

    asyncio.run(main())


def test_a_cancellation_that_is_not_the_watchdogs_propagates() -> None:
    async def main() -> None:
        async def attempt() -> str | None:
            watch = Watchdog(Deadlines(first_byte=30, idle=30))
            try:
                return await _claim_after(watch, 5)
            finally:
                watch.stop()

        task = asyncio.create_task(attempt())
        await asyncio.sleep(0.01)
        task.cancel()
        assert await task is None  # claim() says "not mine"; the caller re-raises

    asyncio.run(main())


def test_outside_a_task_it_refuses() -> None:
    with pytest.raises(RuntimeError):
        Watchdog(Deadlines())
