"""The set-level scheduler: the runs of an evaluation share their model-call slots, so a run
still solving takes the slots a finished one gave back instead of keeping a fixed share."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from solver.config import resolve_settings
from solver.evaluation import Job, drive_jobs
from solver.loop.capacity import SharedCapacity
from solver.problems import Problem
from solver.testing import FakeEndpoint
from tests.report.responders import olympiad, slow


def test_capacity_counts_every_holder_and_wakes_waiters() -> None:
    async def scenario() -> list[str]:
        pool = SharedCapacity(3)
        a, b = object(), object()
        pool.set_used(a, 2, "a")
        pool.set_used(b, 1, "b")
        assert pool.free() == 0
        seen: list[str] = []

        async def waiter() -> None:
            await pool.changed()
            seen.append(f"free {pool.free()}")

        task = asyncio.create_task(waiter())
        await asyncio.sleep(0)
        pool.set_used(a, 2, "a")  # no slot given back: nobody is woken
        await asyncio.sleep(0)
        assert not seen
        pool.release(a)
        await task
        assert (pool.peak, pool.peak_total) == ({"a": 2, "b": 1}, 3)
        return seen

    assert asyncio.run(scenario()) == ["free 2"]
    with pytest.raises(ValueError):
        SharedCapacity(0)


def test_by_need_free_slots_go_first_to_the_runs_with_fewest_accepted_proofs() -> None:
    async def scenario() -> list[str]:
        pool = SharedCapacity(4, by_need=True)
        behind, ahead, third = object(), object(), object()
        pool.set_used(third, 2)
        pool.wait(ahead, 3, accepted=1)  # wants 3 more, one proof accepted
        pool.wait(behind, 1, accepted=0)  # wants 1, none accepted: served first
        assert pool.free(behind) == 2
        assert pool.free(ahead) == 1  # the slot the run without a proof waits for is held
        assert pool.free() == 2  # without a holder: every free slot
        seen: list[str] = []

        async def waiter() -> None:
            await pool.changed()
            seen.append(f"free {pool.free(ahead)}")

        task = asyncio.create_task(waiter())
        await asyncio.sleep(0)
        pool.wait(behind, 0, accepted=0)  # it got its slot: the run behind may go
        await task
        return seen

    assert asyncio.run(scenario()) == ["free 2"]
    first_come = SharedCapacity(4)
    first_come.wait(object(), 3, accepted=0)
    assert first_come.free(object()) == 4  # today's sharing: no one is ahead


def test_a_run_still_solving_takes_the_slots_a_finished_run_gave_back(tmp_path: Path) -> None:
    problems = [
        Problem(id="easy", statement="Prove the easy claim.", reference_solution="Ref."),
        Problem(id="hard", statement="HARD: prove the hard claim.", reference_solution="Ref."),
    ]
    with FakeEndpoint(slow(olympiad, 0.002)) as fake:
        resolved = resolve_settings(
            flags={
                "endpoint": fake.url + "/v1",
                "candidates": 4,
                "concurrency": 2,  # a fixed share would be 2 calls per run
                "acceptance.verifications": 1,
                "acceptance.accepted_needed": 1,
                "budget.calls": 40,
                "grading.evaluation_graders": 1,
            },
            env={},
            cwd=tmp_path,
        )
        jobs = [Job(p.id, 1, tmp_path / p.id / "run-1", p) for p in problems]
        pool = SharedCapacity(4)
        results = asyncio.run(
            drive_jobs(
                jobs,
                resolved,
                concurrency=2,
                argv=["eval"],
                on_result=lambda r: None,
                capacity=pool,
            )
        )
    assert [r.status for r in results] == ["finished", "finished"], [r.error for r in results]
    assert pool.peak_total <= 4  # never more in flight than the set's slots
    assert pool.peak["hard"] > 2  # more than its fixed share once the easy run was done
    assert pool.free() == 4  # every slot given back
