"""Create a run: its directory, manifest and inputs (the problem, a given proof and its rivals),
then its first session driven (:mod:`solver.run.drive`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from solver._util.clock import utc_stamp
from solver.config import ResolvedSettings
from solver.errors import (
    InputError,
)
from solver.identity import new_run_id
from solver.loop.capacity import SharedCapacity
from solver.loop.engine import (
    Recorder,
)
from solver.loop.state import GIVEN, RunState, rival_lineage
from solver.problems import Problem
from solver.records import (
    ArtifactPut,
    Decision,
)
from solver.run.drive import ProgressFactory, RunOutcome, Seams, SessionPlan, drive_session
from solver.run.manifest import build_manifest, manifest_blobs
from solver.run.policy_settings import policy_config
from solver.run.sources import (
    resolve_endpoint,
    role_endpoints,
)
from solver.run.tools import sandbox_ready
from solver.store import (
    RunStore,
    holds_only_create_leftovers,
)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:40] or "problem"


async def start_run(
    problem: Problem,
    problem_path: Path | None,
    resolved: ResolvedSettings,
    *,
    evaluation: bool,
    argv: list[str],
    make_progress: ProgressFactory,
    on_created: Callable[[Path], None],
    run_dir: Path | None = None,
    given_proof: str | None = None,
    rival_proofs: Sequence[str] = (),
    capacity: SharedCapacity | None = None,
    seams: Seams = Seams(),
) -> RunOutcome:
    """Create a run and drive it to its finish. With ``given_proof`` the run only grades that
    proof in evaluation mode (``solver eval calibrate``): there is no solve phase; with
    ``rival_proofs`` as well, the selector compares it with each of them, both ways."""
    settings = resolved.settings
    if given_proof is not None:
        evaluation = True
    endpoint, recorded_endpoint = resolve_endpoint(settings)
    # settings the policy cannot take are refused before the run is written
    policy_config(settings, evaluation=evaluation, material=False)
    await sandbox_ready(settings)
    run_id = new_run_id()
    if run_dir is None:
        stem = _slug(problem_path.stem if problem_path else problem.id)
        run_dir = settings.runs_dir / f"{utc_stamp()}_{stem}_{run_id[-8:]}"
    elif run_dir.is_dir() and not holds_only_create_leftovers(run_dir):
        raise InputError(
            f"{run_dir}: already holds a run; continue it with `solver resume {run_dir}`"
        )
    manifest = build_manifest(
        problem,
        problem_path,
        resolved,
        endpoint,
        recorded_endpoint,
        evaluation,
        argv,
        run_id,
        role_endpoints=role_endpoints(settings),
    )
    if given_proof is not None:
        # so that a resume can record it if need be
        manifest = manifest.model_copy(update={"given_proof": given_proof})
        if rival_proofs:
            manifest = manifest.model_copy(update={"rival_proofs": list(rival_proofs)})
    store = RunStore.create(
        run_dir, manifest.to_json(), signing_key=settings.signing_key, blobs=manifest_blobs(problem)
    )
    with store:
        on_created(run_dir)
        state = RunState(reviews=settings.acceptance.review)
        recorder = Recorder(store, state)
        store.set_session(1)
        record_inputs(recorder, problem, evaluation, given_proof, rival_proofs)
        plan = SessionPlan(
            settings=settings,
            endpoint=endpoint,
            problem=problem,
            evaluation=evaluation,
            reason="fresh",
            argv=argv,
            allow_model_change=False,
            make_progress=make_progress,
            capacity=capacity,
            seams=seams,
        )
        return await drive_session(store, state, plan)


def record_inputs(
    recorder: Recorder,
    problem: Problem,
    evaluation: bool,
    given_proof: str | None,
    rival_proofs: Sequence[str] = (),
) -> None:
    """The run's inputs as artifacts (and, for a grading-only run, the given proof, its
    rivals and the decisions that skip the solve phase). Idempotent: a session killed right
    after the run was created left some of them unwritten, and every session calls this
    first."""
    state = recorder.state
    for artifact, kind, text in problem_artifacts(problem, evaluation):
        if artifact not in state.artifacts:
            recorder.append(
                ArtifactPut(
                    artifact=artifact,
                    kind=kind,
                    blob=recorder.blob(text.encode()),
                    producer="problem",
                )
            )
    if given_proof is None:
        return
    given = [(GIVEN, given_proof), *((rival_lineage(n), p) for n, p in enumerate(rival_proofs))]
    for lineage, proof in given:
        if f"{lineage}.v0.proof" not in state.artifacts:
            recorder.append(
                ArtifactPut(
                    artifact=f"{lineage}.v0.proof",
                    kind="proof_text",
                    blob=recorder.blob(proof.encode()),
                    producer="input",
                    lineage=lineage,
                    version=0,
                )
            )
    if state.selected is None:
        recorder.append(Decision(kind="selected", lineage=GIVEN, version=0, reason="given proof"))
    if state.phase == "solve":
        recorder.append(Decision(kind="phase", phase="evaluate", reason="grading only"))


def problem_artifacts(problem: Problem, evaluation: bool) -> list[tuple[str, str, str]]:
    found = [("problem", "problem_statement", problem.statement)]
    if evaluation and problem.reference_solution:
        found.append(("reference_solution", "reference_solution", problem.reference_solution))
    if evaluation and problem.grading_guidelines:
        found.append(("grading_guidelines", "grading_guidelines", problem.grading_guidelines))
    return found
