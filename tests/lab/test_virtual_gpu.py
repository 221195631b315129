"""The lab's virtual GPU: processor sharing among the calls on it, and a server's slots that
queue the rest in order of arrival."""

from __future__ import annotations

import asyncio

import pytest

from solver.llm import Usage
from solver.testing import GpuModel, VirtualGpu
from solver.testing.fake_endpoint import RecordedRequest, Reply

# 100 decoded tokens at 50 tok/s: 2 s alone; a 400-token prompt at 4000 tok/s adds 0.1 s
PROMPT, COMPLETION = 400, 100
ALONE = PROMPT / 4_000 + COMPLETION / 50


async def _finish_times(gpu: VirtualGpu, calls: int) -> list[float]:
    """Start ``calls`` identical calls at once; the virtual time at which each one ends."""
    ended: list[float] = [0.0] * calls

    async def one(index: int) -> None:
        await gpu.hold_tokens(index, PROMPT, COMPLETION)
        ended[index] = gpu.now

    await asyncio.gather(*(one(i) for i in range(calls)))
    return ended


def test_calls_on_the_gpu_share_it_and_are_slowed_by_the_saturation_curve() -> None:
    gpu = VirtualGpu(model=GpuModel(saturation=4.0))
    ended = asyncio.run(_finish_times(gpu, 3))
    # three at once: each 1 + 2/4 = 1.5 times slower, all ending together
    assert ended == pytest.approx([ALONE * 1.5] * 3)
    assert gpu.decode_tokens == 3 * COMPLETION and gpu.prefill_tokens == 3 * PROMPT
    assert gpu.peak == 3


def test_calls_past_the_servers_slots_wait_their_turn_in_order_of_arrival() -> None:
    gpu = VirtualGpu(model=GpuModel(saturation=4.0, slots=2))
    ended = asyncio.run(_finish_times(gpu, 3))
    # two run together (1.25 times slower); the third starts when they end, and runs alone
    pair = ALONE * 1.25
    assert ended == pytest.approx([pair, pair, pair + ALONE])
    assert gpu.decode_tokens == 3 * COMPLETION


def test_no_slot_limit_is_the_gpu_as_it_was() -> None:
    unlimited = asyncio.run(_finish_times(VirtualGpu(model=GpuModel(saturation=4.0)), 5))
    wide = asyncio.run(_finish_times(VirtualGpu(model=GpuModel(saturation=4.0, slots=5)), 5))
    assert unlimited == wide


def _request() -> RecordedRequest:
    return RecordedRequest(api="chat", path="/v1/chat/completions", headers={}, body=b"{}")


def test_a_call_cancelled_in_the_queue_spent_nothing_and_frees_no_time() -> None:
    """The fake endpoint's pacing protocol: ``hold``, and ``cut`` for a cancelled call."""

    async def scenario() -> tuple[VirtualGpu, Usage, Usage, float]:
        gpu = VirtualGpu(model=GpuModel(slots=1))
        requests = [_request() for _ in range(4)]
        first = asyncio.create_task(gpu.hold(requests[0], Reply(), (PROMPT, COMPLETION)))
        queued = asyncio.create_task(gpu.hold(requests[1], Reply(), (PROMPT, COMPLETION)))
        await asyncio.sleep(0)  # both have arrived; the second waits for the slot
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        waited = gpu.cut(requests[1])
        await first
        running_end = gpu.now
        # a call cancelled once on the GPU spent its prompt and what it decoded so far
        third = asyncio.create_task(gpu.hold(requests[2], Reply(), (PROMPT, COMPLETION)))
        fourth = asyncio.create_task(gpu.hold(requests[3], Reply(), (PROMPT, 2 * COMPLETION)))
        await third  # the fourth has waited, then taken the slot
        fourth.cancel()
        with pytest.raises(asyncio.CancelledError):
            await fourth
        return gpu, waited, gpu.cut(requests[3]), running_end

    gpu, waited, started, running_end = asyncio.run(scenario())
    assert waited == Usage()
    assert running_end == pytest.approx(ALONE)  # the queued call took no share of the GPU
    assert started.input_tokens == PROMPT and started.output_tokens == 0
    assert gpu.decode_tokens == 2 * COMPLETION


def test_a_wait_off_the_gpu_passes_virtual_time_without_slowing_the_calls_on_it() -> None:
    """A tool's run: its seconds pass for its caller while a call on the GPU keeps its pace."""
    gpu = VirtualGpu(model=GpuModel(saturation=4.0))
    ended: dict[str, float] = {}

    async def call() -> None:
        await gpu.hold_tokens(1, PROMPT, COMPLETION)
        ended["call"] = gpu.now

    async def tool() -> None:
        await gpu.wait(0.5)
        ended["tool"] = gpu.now
        await gpu.wait(10.0)
        ended["later"] = gpu.now

    async def both() -> None:
        await asyncio.gather(call(), tool())

    asyncio.run(both())
    assert ended == pytest.approx({"tool": 0.5, "call": ALONE, "later": 10.5})
    assert gpu.peak == 1 and gpu.decode_tokens == COMPLETION
