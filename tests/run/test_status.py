"""One run-state classifier: `solver status` and `solver report` name every case alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from solver.loop.state import RunState
from solver.records import SessionEnded, SessionStarted
from solver.report import load_report
from solver.run import RunCondition, run_condition, run_status
from solver.store import RunStore, WriterInfo

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "run-v1-signed"


def _state(*ended: str, open_session: bool = False) -> RunState:
    state = RunState()
    t = "2026-12-01T10:00:00.000000Z"
    for number, reason in enumerate(ended, start=1):
        state.apply(
            SessionStarted(session=number, reason="fresh", pid=1, host="h", code={}, argv=[]), t
        )
        state.apply(SessionEnded(session=number, reason=reason, wall_s=1.0), t)  # type: ignore[arg-type]
    if open_session:
        started = SessionStarted(
            session=len(ended) + 1, reason="resume", pid=1, host="h", code={}, argv=[]
        )
        state.apply(started, t)
    return state


@pytest.mark.parametrize(
    ("state", "writer", "expected"),
    [
        (RunState(), WriterInfo(), "created"),
        (_state(open_session=True), WriterInfo(), "crashed"),
        (_state(open_session=True), WriterInfo(session=1, stopped="storage_full"), "storage-full"),
        # what the writer left belongs to an older session: this one crashed
        (
            _state("finished", open_session=True),
            WriterInfo(session=1, stopped="storage_full"),
            "crashed",
        ),
        (_state("storage_full"), WriterInfo(), "storage-full"),
        (_state("interrupted"), WriterInfo(), "interrupted"),
        (_state("endpoint_unavailable"), WriterInfo(), "waiting-for-endpoint"),
        (_state("error"), WriterInfo(), "stopped"),
        (_state("crashed"), WriterInfo(), "stopped"),
    ],
)
def test_every_case_has_one_name(
    state: RunState, writer: WriterInfo, expected: RunCondition
) -> None:
    assert run_condition(state, None, writer) == expected


def test_a_held_lock_is_running_and_a_finished_run_finished() -> None:
    assert run_condition(RunState(), WriterInfo(pid=1), WriterInfo()) == "running"
    finished = RunState()
    finished.phase = "finished"
    assert run_condition(finished, None, WriterInfo()) == "finished"


def test_status_and_report_agree_on_a_run_with_no_session(tmp_path: Path) -> None:
    """Created and then killed before its first session: not a crash, resume starts it."""
    manifest = json.loads((FIXTURE / "MANIFEST.json").read_bytes())
    manifest.pop("signing")
    run_dir = tmp_path / "run"
    blobs = [path.read_bytes() for path in (FIXTURE / "blobs").rglob("*") if path.is_file()]
    RunStore.create(run_dir, manifest, blobs=blobs).close()
    assert run_status(run_dir)["state"] == "created"
    assert load_report(run_dir).state == "created"


def test_status_and_report_agree_on_the_pre_redesign_run() -> None:
    assert run_status(FIXTURE)["state"] == load_report(FIXTURE).state == "finished"
