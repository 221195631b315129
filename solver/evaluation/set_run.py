"""An evaluation of a problem set (`solver eval SET`): its runs, planned into an output
directory, scored when they have finished, and written up as results files."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solver.config import ResolvedSettings, Settings
from solver.evaluation.evaluate import (
    Job,
    JobResult,
    file_digest,
    looks_finished,
    prepare_out,
    run_settings,
)
from solver.evaluation.output import Written, write_results
from solver.evaluation.scores import EvalSummary, RunScore, score_from_result, summarise
from solver.problems import Problem
from solver.run import read_state


@dataclass(frozen=True)
class SetPlan:
    """The runs of one set evaluation, each in its own directory under ``out_dir``."""

    set_path: Path
    out_dir: Path
    problems: tuple[Problem, ...]
    runs: int
    graders: int
    digest: str
    jobs: tuple[Job, ...]


def plan_counts(jobs: Sequence[Job]) -> tuple[int, int, int]:
    """Of these runs: how many have finished, how many to resume, how many to start."""
    done = sum(looks_finished(j.run_dir) for j in jobs)
    started = sum((j.run_dir / "MANIFEST.json").is_file() for j in jobs) - done
    return done, started, len(jobs) - done - started


def default_out_dir(set_path: Path, prefix: str = "") -> Path:
    """Where a set's evaluation goes unless ``--out`` says: ``evals/<stem>-<digest>``, the
    digest of the set's absolute path, so two sets of one name (``problems.json`` in two
    folders) never share a folder, and the same set comes back to its own."""
    where = os.path.abspath(set_path.expanduser()).encode("utf-8", "surrogateescape")
    return Path("evals") / f"{prefix}{set_path.stem}-{hashlib.sha256(where).hexdigest()[:8]}"


def plan_set(
    set_path: Path,
    problems: list[Problem],
    runs: int,
    out_dir: Path,
    resolved: ResolvedSettings,
) -> SetPlan:
    """Prepare ``out_dir`` for this set and these settings (refusing one made for another
    set or other settings) and name every run's directory."""
    digest = file_digest(set_path)
    identity: dict[str, Any] = {"digest": digest, "items": [p.id for p in problems]}
    graders = resolved.settings.grading.evaluation_graders
    names = prepare_out(
        out_dir,
        identity,
        kind="set",
        extra={"set_path": str(set_path), "runs": runs, "graders": graders},
        settings=run_settings(resolved.settings, solve=True),
    )
    jobs = tuple(
        Job(p.id, n, out_dir / names[p.id] / f"run-{n}", p)
        for n in range(1, runs + 1)
        for p in problems
    )
    return SetPlan(set_path, out_dir, tuple(problems), runs, graders, digest, jobs)


def run_score(result: JobResult) -> RunScore:
    job = result.job
    if result.status == "finished":
        return score_from_result(
            job.key, job.run, str(job.run_dir), job.problem.points, result.result
        )
    return RunScore(
        job.key, job.run, str(job.run_dir), result.status, job.problem.points, error=result.error
    )


def served_model(results: list[JobResult]) -> str | None:
    """The model the first finished run was served (what the results are of)."""
    for result in results:
        if result.status == "finished":
            return read_state(result.job.run_dir)[1].served_model
    return None


def grading_line(settings: Settings) -> str:
    """How the graders' grades became the evaluation grade, in one line for the header."""
    grading = settings.grading
    again = (
        f"re-judged when they spread more than {grading.reconcile_spread}"
        if grading.reconcile == "rejudge"
        else "never re-judged"
    )
    scale = "ProofBench 7/6/1/0" if grading.scale == "proofbench" else "0-7 points"
    return f"{grading.aggregation} of the graders' last grades ({again}); {scale}"


def write_set_results(
    plan: SetPlan, results: list[JobResult], settings: Settings
) -> tuple[EvalSummary, Written]:
    """Score every run, total them per run index, and write results.json, .md and .png; how
    grades were made and on what scale (from ``settings``) joins the header."""
    scores = [run_score(result) for result in results]
    summary = summarise([(p.id, p.points) for p in plan.problems], scores, plan.runs)
    header: dict[str, Any] = {
        "set": {"path": str(plan.set_path), "digest": plan.digest},
        "runs": plan.runs,
        "graders": plan.graders,
        "grading": grading_line(settings),
        "scale": settings.grading.scale,
        "model": served_model(results),
    }
    return summary, write_results(plan.out_dir, summary, header)
