"""Open and resume runs: the writer lock taken and the journal folded, a crashed session's end
recorded, the endpoint a resumed run may talk to checked before anything is sent.
"""

from __future__ import annotations

from pathlib import Path

from solver._util.clock import seconds_between
from solver.config import ResolvedSettings
from solver.errors import (
    NotFound,
)
from solver.loop.capacity import SharedCapacity
from solver.loop.engine import (
    Recorder,
)
from solver.loop.state import RunState
from solver.records import (
    SessionEnded,
)
from solver.run.drive import (
    ProgressFactory,
    RunOutcome,
    Seams,
    SessionPlan,
    drive_session,
    finished_outcome,
)
from solver.run.journal import collector_paused, fold, read_state, reviews_in
from solver.run.manifest import read_manifest, settings_of_run
from solver.run.sources import (
    resume_endpoint,
    resume_signing_key,
)
from solver.run.start import record_inputs
from solver.run.tools import sandbox_ready
from solver.store import (
    RunStore,
)


def open_run(run_dir: Path, signing_key: Path | None = None) -> tuple[RunStore, RunState]:
    """Take the run's writer lock, repair and verify its journal, fold it into state."""
    if not (run_dir / "MANIFEST.json").is_file():
        raise NotFound(f"{run_dir}: not a run directory (no MANIFEST.json)")
    with collector_paused():
        store = RunStore.open(run_dir, signing_key=signing_key)
        try:
            state = fold(store.records(), reviews=reviews_in(store.manifest))
        except BaseException:
            store.close()
            raise
    return store, state


async def resume_run(
    run_dir: Path,
    resolved_now: ResolvedSettings,
    *,
    allow_model_change: bool,
    argv: list[str],
    make_progress: ProgressFactory,
    capacity: SharedCapacity | None = None,
    endpoint: str | None = None,
    seams: Seams = Seams(),
) -> RunOutcome:
    """Continue a run. The run is checked first (lock, chain, manifest binding, the
    endpoint it may talk to); only then is anything sent. ``endpoint`` moves the run to
    another server (`solver resume RUN --endpoint URL`), recorded for this session."""
    if not (run_dir / "MANIFEST.json").is_file():
        raise NotFound(f"{run_dir}: not a run directory (no MANIFEST.json)")
    today = resolved_now.settings.signing_key
    key = resume_signing_key(run_dir, today, lambda: read_state(run_dir)[1])
    store, state = open_run(run_dir, key)
    with store:
        manifest = read_manifest(store.manifest, run_dir)
        recorder = Recorder(store, state)
        if state.session_open:
            # Also for a finished run: a kill after run.finished leaves its session open.
            recorder.append(
                SessionEnded(
                    session=state.sessions,
                    reason="crashed",
                    detail="the session ended without recording why (killed or crashed)",
                    wall_s=seconds_between(state.session_started_t, state.last_t),
                )
            )
        if state.phase == "finished":
            return finished_outcome(store, state)
        settings = settings_of_run(manifest, resolved_now)
        await sandbox_ready(settings)
        problem = manifest.problem.record
        target = resume_endpoint(
            manifest.endpoint, manifest.model.requested, resolved_now.settings, endpoint
        )
        record_inputs(
            recorder,
            problem,
            manifest.evaluation,
            manifest.given_proof,
            manifest.rival_proofs or (),
        )
        plan = SessionPlan(
            settings=settings,
            endpoint=target.endpoint,
            problem=problem,
            evaluation=manifest.evaluation,
            reason="resume",
            argv=argv,
            allow_model_change=allow_model_change,
            make_progress=make_progress,
            capacity=capacity,
            moved_endpoint=target.moved,
            seams=seams,
        )
        return await drive_session(store, state, plan)
