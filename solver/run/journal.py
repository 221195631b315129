"""A run's journal read back: each line into its typed record, the records folded into the
run's state. Pure (no model client), so status, report and evaluation read runs offline."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from solver.errors import NotFound, RunCorrupt
from solver.loop.state import RunState, reviews_of
from solver.records import LOOP_RECORD_TYPES, RECORD_VERSION, LoopRecord, parse_loop_record
from solver.store import STORE_RECORD_TYPES, Record, RunReader


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Folding a long journal allocates a few objects per record and frees none of them, so
    the cyclic collector would only rescan them again and again (about half the time of a
    100k-record resume). Nothing folded forms a cycle; pausing it loses nothing."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def fold(records: Iterator[Record], *, reviews: bool = True) -> RunState:
    """RunState from journal records, each read into its typed record. Versions newer than
    this solver reads are refused; a line that is not its type's record is a damaged run.
    ``reviews``: the run's ``acceptance.review`` (``reviews_of`` its manifest)."""
    state = RunState(reviews=reviews)
    for rec in records:
        typed = typed_record(rec)
        if typed is not None:
            state.apply(typed, rec.t)
    return state


def typed_record(rec: Record) -> LoopRecord | None:
    """The loop's record a journal line holds; None for the store's own lines. A type
    neither the store nor the loop knows, or a loop type at another version, is refused as
    the audit refuses it (exit 65): a newer solver's record, or damage."""
    if rec.type not in LOOP_RECORD_TYPES:
        if rec.type in STORE_RECORD_TYPES:
            return None
        raise RunCorrupt(
            f"record {rec.seq} has type {rec.type!r}, which this solver does not know: "
            "upgrade olympiad-solver, or run `solver audit` on the run"
        )
    if rec.v != RECORD_VERSION:
        raise RunCorrupt(
            f"record {rec.seq} ({rec.type}) has version {rec.v}; this solver reads "
            f"{RECORD_VERSION}: upgrade olympiad-solver to continue this run"
        )
    try:
        return parse_loop_record(rec.type, rec.v, rec.data)
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(part) for part in first["loc"]) or "(top)"
        raise RunCorrupt(f"record {rec.seq} ({rec.type}): {at}: {first['msg']}") from None


def read_state(run_dir: Path) -> tuple[RunReader, RunState]:
    if not (run_dir / "MANIFEST.json").is_file():
        raise NotFound(f"{run_dir}: not a run directory (no MANIFEST.json)")
    reader = RunReader(run_dir)
    with collector_paused():
        return reader, fold(reader.records(), reviews=reviews_in(reader.manifest))


def reviews_in(manifest: dict[str, Any]) -> bool:
    """Whether the run whose manifest this is reviews failing reports (``reviews_of`` its
    resolved settings)."""
    config = manifest.get("config")
    return reviews_of(config.get("resolved") if isinstance(config, dict) else None)
