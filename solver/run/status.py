"""What a run is doing, derived from its journal without taking the lock: the one classifier
behind both `solver status` and `solver report`."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Protocol, TypedDict

from solver._util.clock import seconds_between
from solver.loop.state import RunState
from solver.run.journal import read_state
from solver.store import WriterInfo

RunCondition = Literal[
    "running",  # a live writer holds the lock
    "finished",
    "created",  # created, and no session has started yet: resume starts the first one
    "crashed",  # a session started and did not record its end (killed, or the host died)
    "storage-full",  # the disk had no room: free space, then resume
    "interrupted",
    "waiting-for-endpoint",  # the last session gave up on the endpoint: resume when it is back
    "stopped",  # the last session ended on an error
]


class SessionView(Protocol):
    """What the classifier reads of a run: the folded :class:`RunState`, or what `solver runs`
    reads off a finished run's journal tail without folding it."""

    @property
    def phase(self) -> str: ...
    @property
    def sessions(self) -> int: ...
    @property
    def session_open(self) -> bool: ...
    @property
    def session_end_reason(self) -> str: ...


class RunStatus(TypedDict):
    """What ``solver status`` reports of a run (``--json`` prints it as one object)."""

    run_dir: str
    state: RunCondition
    phase: str
    outcome: str | None
    sessions: int
    calls: int
    in_flight: int
    accepted: int
    lineages: int
    tokens: int
    wall_s: float
    records: int
    last_activity: str
    holder: dict[str, int | str] | None
    served_model: str | None


def run_condition(
    state: SessionView, holder: WriterInfo | None, writer: WriterInfo
) -> RunCondition:
    """``holder`` is the live lock holder (None when the lock is free) and ``writer`` what the
    last writer left in the lock file."""
    if holder is not None:
        return "running"
    if state.phase == "finished":
        return "finished"
    if state.sessions == 0:
        return "created"
    if state.session_open:
        # A full disk may not have had room for the session's last record either; the lock
        # file says so, where the journal cannot.
        return "storage-full" if _stopped(writer, state) == "storage_full" else "crashed"
    reason = state.session_end_reason
    if reason == "interrupted":
        return "interrupted"
    if reason == "endpoint_unavailable":
        return "waiting-for-endpoint"
    if reason == "storage_full":
        return "storage-full"
    return "stopped"


def wall_seconds(state: RunState) -> float:
    """Time the run's sessions took; a session that has not recorded its end (it runs, or it
    crashed) counts up to its last record."""
    wall_s = state.ended_wall_s
    if state.session_open:
        wall_s += seconds_between(state.session_started_t, state.last_t)
    return wall_s


def run_status(run_dir: Path) -> RunStatus:
    reader, state = read_state(run_dir)
    holder = reader.lock_holder()
    return {
        "run_dir": str(run_dir),
        "state": run_condition(state, holder, reader.last_writer()),
        "phase": state.phase,
        "outcome": state.outcome,
        "sessions": state.sessions,
        "calls": len(state.calls),
        "in_flight": len(state.in_flight()),
        "accepted": len(state.accepted()),
        "lineages": len(state.lineages),
        "tokens": state.tokens_total,
        "wall_s": round(wall_seconds(state), 1),
        "records": state.records,
        "last_activity": state.last_t,
        "holder": holder.as_json() if holder is not None else None,
        "served_model": state.served_model,
    }


def _stopped(writer: WriterInfo, state: SessionView) -> str | None:
    """Why the last session's writer gave up, as it left it in the lock file."""
    return writer.stopped if writer.session == state.sessions else None
