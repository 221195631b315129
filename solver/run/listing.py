"""`solver runs`: the runs under a runs directory, newest first, read without the lock.

A finished run is read from its manifest, ``final/result.json`` and the journal's last 64 KiB
(where ``run.finished`` and the session's end are), so a run of 100k records lists as fast as
one of 100. Any other run is folded as `solver status` folds it: those are the running,
interrupted or crashed ones, whose totals only the journal holds. The state is named by the
one classifier, :func:`solver.run.status.run_condition`.

Every entry of the directory is untrusted: a symlink is not followed, and a directory whose
manifest, journal or result does not read is listed as ``damaged`` with the reason, never
raised.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solver._util.terminal import one_line
from solver.loop.policy import grade_of
from solver.loop.state import RunState
from solver.records import Manifest
from solver.run.journal import read_state
from solver.run.manifest import read_manifest
from solver.run.status import run_condition, wall_seconds
from solver.store import RunReader, read_regular

__all__ = ["TAIL_BYTES", "RunRow", "list_runs", "read_run_row"]

TAIL_BYTES = 64 * 1024
_RESULT_BYTES = 1 << 20


@dataclass(frozen=True)
class RunRow:
    """One line of `solver runs`. ``status`` is a run condition or ``damaged`` (then
    ``detail`` says why)."""

    path: Path
    status: str
    problem: str | None = None
    outcome: str | None = None
    best_grade: int | None = None
    started: str | None = None
    wall_s: float | None = None
    tokens: int | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "run_dir": str(self.path),
            "status": self.status,
            "problem": self.problem,
            "outcome": self.outcome,
            "best_grade": self.best_grade,
            "started": self.started,
            "wall_s": self.wall_s,
            "tokens": self.tokens,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class _TailState:
    """The classifier's inputs for a run whose journal tail holds ``run.finished``."""

    phase: str
    sessions: int
    session_open: bool
    session_end_reason: str


def list_runs(runs_dir: Path) -> list[RunRow]:
    """Every run directory directly under ``runs_dir``, newest first. Entries that are not
    directories (a README) or directories without a MANIFEST.json are not runs and are left
    out; a symlink is listed as damaged, not followed."""
    rows: list[RunRow] = []
    with os.scandir(runs_dir) as entries:
        for entry in entries:
            path = Path(runs_dir) / entry.name
            if entry.is_symlink():
                if _manifest_present(path):
                    rows.append(RunRow(path, "damaged", detail="a symbolic link, not followed"))
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue
            if not os.path.lexists(path / "MANIFEST.json"):
                continue
            rows.append(read_run_row(path))
    rows.sort(key=lambda row: (row.started or "", row.path.name), reverse=True)
    return rows


def _manifest_present(path: Path) -> bool:
    try:
        return path.is_dir() and os.path.lexists(path / "MANIFEST.json")
    except OSError:
        return False


def read_run_row(run_dir: Path) -> RunRow:
    """One run's row; whatever its files hold, a row (``damaged`` when they do not read)."""
    try:
        reader = RunReader(run_dir)
        manifest = read_manifest(reader.manifest, run_dir)
        quick = _finished_row(run_dir, reader, manifest)
        return quick if quick is not None else _folded_row(run_dir, reader, manifest)
    except Exception as exc:
        return RunRow(run_dir, "damaged", detail=one_line(str(exc) or type(exc).__name__, 300))


def _finished_row(run_dir: Path, reader: RunReader, manifest: Manifest) -> RunRow | None:
    """The row of a finished run from its result and journal tail; None when the tail does
    not show ``run.finished`` or the result does not read (then the journal is folded)."""
    tail = reader.tail(TAIL_BYTES)
    if not any(record.get("type") == "run.finished" for record in tail):
        return None
    try:
        result = json.loads(read_regular(run_dir / "final" / "result.json", _RESULT_BYTES))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(result, dict):
        return None
    sessions = [r for r in tail if r.get("type") in ("session.started", "session.ended")]
    last = sessions[-1] if sessions else {}
    data = last.get("data") if isinstance(last.get("data"), dict) else {}
    assert isinstance(data, dict)
    number = data.get("session")
    view = _TailState(
        phase="finished",
        sessions=number if isinstance(number, int) else 0,
        session_open=last.get("type") == "session.started",
        session_end_reason=str(data.get("reason", "")),
    )
    status = run_condition(view, reader.lock_holder(), reader.last_writer())
    tokens = result.get("tokens")
    score = result.get("score")
    wall = result.get("wall_s")
    return RunRow(
        run_dir,
        status,
        problem=manifest.problem.record.id,
        outcome=_text(result.get("outcome")),
        best_grade=score if isinstance(score, int) and not isinstance(score, bool) else None,
        started=manifest.created,
        wall_s=float(wall) if isinstance(wall, int | float) else None,
        tokens=_int(tokens.get("total")) if isinstance(tokens, dict) else None,
    )


def _folded_row(run_dir: Path, reader: RunReader, manifest: Manifest) -> RunRow:
    _, state = read_state(run_dir)
    return RunRow(
        run_dir,
        run_condition(state, reader.lock_holder(), reader.last_writer()),
        problem=manifest.problem.record.id,
        outcome=state.outcome,
        best_grade=_best_grade(state),
        started=manifest.created,
        wall_s=round(wall_seconds(state), 1),
        tokens=state.tokens_total,
    )


def _best_grade(state: RunState) -> int | None:
    grades = [
        grade
        for lineage in state.lineages.values()
        for version in lineage.versions.values()
        if (grade := grade_of(state, version)) is not None
    ]
    return max(grades) if grades else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
