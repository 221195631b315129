"""`solver status`: what a run is doing, derived from its journal without taking the lock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from solver._util.clock import seconds_between
from solver.loop.state import RunState
from solver.run.session import read_state


def run_status(run_dir: Path) -> dict[str, Any]:
    reader, state = read_state(run_dir)
    holder = reader.lock_holder()
    if holder is not None:
        run_state = "running"
    elif state.phase == "finished":
        run_state = "finished"
    elif state.session_open and _stopped(reader.last_writer(), state) == "storage_full":
        run_state = "storage-full"  # the disk had no room for the session's last record
    elif state.session_open or not state.sessions:
        run_state = "crashed"
    elif state.session_end_reason == "interrupted":
        run_state = "interrupted"
    elif state.session_end_reason == "endpoint_unavailable":
        run_state = "waiting-for-endpoint"
    elif state.session_end_reason == "storage_full":
        run_state = "storage-full"
    else:
        run_state = "stopped"
    wall_s = state.ended_wall_s
    if state.session_open:  # a crashed (or running) session has not recorded its time yet
        wall_s += seconds_between(state.session_started_t, state.last_t)
    return {
        "run_dir": str(run_dir),
        "state": run_state,
        "phase": state.phase,
        "outcome": state.outcome,
        "sessions": state.sessions,
        "calls": len(state.calls),
        "in_flight": len(state.in_flight()),
        "accepted": len(state.accepted()),
        "lineages": len(state.lineages),
        "tokens": state.tokens_total,
        "wall_s": round(wall_s, 1),
        "records": state.records,
        "last_activity": state.last_t,
        "holder": holder,
        "served_model": state.served_model,
    }


def _stopped(writer: dict[str, Any], state: RunState) -> str | None:
    """Why the last session's writer gave up, as it left it in the lock file."""
    if writer.get("session") != state.sessions:
        return None
    reason = writer.get("stopped")
    return reason if isinstance(reason, str) else None
