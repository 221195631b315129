"""`solver eval SET`: solve every problem of a set N times and grade each final proof.

Layout of an evaluation directory (``--out``, default ``evals/<set-stem>``)::

    OUT/EVAL.json                  what is evaluated: the set's path and SHA-256, problem ids,
                                   N, G and the other solve settings (fixed: a later invocation
                                   with other settings is refused), the directory of each problem
    OUT/<problem>/run-<n>/         one normal run directory per problem and run (n = 1..N)
    OUT/results.json               every run's score, per-problem and total mean and spread
    OUT/results.md                 the same for people ("P1 7/7 ... total 37/42")
    OUT/results.png                a chart of the mean scores per problem

Every run is a normal run in evaluation mode: after its solve phase, G graders grade the
selected proof against the set's reference solution and grading guidelines when present, and a
reconciliation grader decides when their grades spread more than ``grading.reconcile_spread``.

Re-running the same command continues: finished runs are read, never repeated; unfinished ones
are resumed (completed calls are never repeated); missing ones are started.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from solver.config import ResolvedSettings, Settings, resolve_settings
from solver.errors import InputError, SolverError, exit_code_for
from solver.evaluation.scores import RunStatus
from solver.llm import RetryNotice
from solver.loop.capacity import SharedCapacity
from solver.loop.engine import AttemptFailure, RunProgress
from solver.loop.state import CallState, RunState
from solver.problems import Problem
from solver.records import Decision
from solver.run import ProgressFactory, RunOutcome, read_state, resume_run, start_run
from solver.store import holds_only_create_leftovers, write_atomic

EVAL_FORMAT = "solver-eval/1"
EVAL_FILE = "EVAL.json"
EVAL_GRADERS = 3  # G when neither --graders nor the configuration file sets it
GRADERS_KEY = "grading.evaluation_graders"


class QuietProgress:
    """The RunProgress of one run inside an evaluation: it reports nothing per call; the
    evaluation prints one line per finished run instead."""

    def call_started(self, call: CallState) -> None:
        pass

    def call_finished(self, call: CallState) -> None:
        pass

    def streamed(self, call_id: str, chars: int) -> None:
        pass

    def retrying(self, call_id: str, notice: RetryNotice) -> None:
        pass

    def decided(self, decision: Decision) -> None:
        pass

    def attempt_failed(self, failure: AttemptFailure) -> None:
        pass


def quiet_progress(state: RunState, elapsed: Callable[[], float]) -> RunProgress:
    return QuietProgress()


class _MonitoredRun(QuietProgress):
    def __init__(self, monitor: EvalMonitor, label: str, state: RunState) -> None:
        self.monitor = monitor
        self.label = label
        self.state = state

    def call_finished(self, call: CallState) -> None:
        self.monitor.tick()

    def streamed(self, call_id: str, chars: int) -> None:
        self.monitor.tick()

    def attempt_failed(self, failure: AttemptFailure) -> None:
        if self.monitor.on_failure is not None:
            self.monitor.on_failure(self.label, failure)


class EvalMonitor:
    """Progress of a whole evaluation: at most every ``every_s`` seconds, one summary of the
    runs in flight (phase, calls, tokens) goes to ``emit``. Reads the runs' folded states;
    writes nothing to any run."""

    def __init__(
        self,
        total: int,
        every_s: float,
        emit: Callable[[dict[str, Any]], None],
        on_failure: Callable[[str, AttemptFailure], None] | None = None,
    ):
        """``on_failure``: told at once of an attempt that failed in a run (a cut stream, a
        worker behind a gateway that died), with the run's label."""
        self.total = total
        self.every_s = every_s
        self.emit = emit
        self.on_failure = on_failure
        self.finished = 0
        self.live: dict[str, RunState] = {}
        self._last = time.monotonic()

    def factory(self, label: str) -> ProgressFactory:
        def make(state: RunState, elapsed: Callable[[], float]) -> RunProgress:
            self.live[label] = state
            return _MonitoredRun(self, label, state)

        return make

    def ended(self, label: str) -> None:
        self.live.pop(label, None)
        self.finished += 1

    def tick(self) -> None:
        now = time.monotonic()
        if self.every_s <= 0 or now - self._last < self.every_s:
            return
        self._last = now
        self.emit(self.snapshot())

    def snapshot(self) -> dict[str, Any]:
        return {
            "finished": self.finished,
            "total": self.total,
            "running": {
                label: {
                    "phase": state.phase,
                    "calls": len(state.calls),
                    "accepted": len(state.accepted()),
                    "tokens": state.tokens_total,
                }
                for label, state in sorted(self.live.items())
            },
        }


def file_digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def directory_names(ids: list[str]) -> dict[str, str]:
    """A distinct, filesystem-safe directory name for each id, stable for a given list."""
    names: dict[str, str] = {}
    used: set[str] = set()
    for problem_id in ids:
        base = re.sub(r"[^A-Za-z0-9._-]+", "-", problem_id).strip("-.")[:60] or "problem"
        name, k = base, 2
        while name.lower() in used:
            name, k = f"{base}-{k}", k + 1
        used.add(name.lower())
        names[problem_id] = name
    return names


@dataclass(frozen=True)
class Job:
    """One run of an evaluation: a problem, its run index, its directory."""

    key: str  # problem id (or item id for calibration)
    run: int
    run_dir: Path
    problem: Problem
    given_proof: str | None = None
    rival_proofs: tuple[str, ...] = ()  # compared with the given proof, pairwise


@dataclass(frozen=True)
class JobResult:
    job: Job
    status: RunStatus
    result: dict[str, Any]
    error: str = ""
    exit_code: int = 0
    resumed: bool = False
    skipped: bool = False  # finished before this invocation

    @property
    def grade(self) -> int | None:
        grade: int | None = self.result.get("evaluation_score")
        return grade

    @property
    def outcome(self) -> str | None:
        """The run's outcome; a grading-only run (calibration) solves nothing, so it is
        "graded" ("unsolved" would mislead)."""
        if self.job.given_proof is not None:
            return "graded"
        outcome: str | None = self.result.get("outcome")
        return outcome

    @property
    def has_proof(self) -> bool:
        """Whether there was a proof to grade (a missing grade then means "ungraded")."""
        return self.result.get("selected") is not None or self.job.given_proof is not None

    @property
    def how(self) -> str:
        """How this invocation came by the result."""
        return "already finished" if self.skipped else ("resumed" if self.resumed else "run")


def eval_settings(config_file: Path | None, flags: dict[str, Any]) -> ResolvedSettings:
    """The settings from ``flags`` (dotted keys), environment and configuration file; G is the
    eval's own default (3) only when neither the flag nor the file sets it (plain solve
    keeps 1)."""
    resolved = resolve_settings(config_file=config_file, flags=flags)
    if resolved.sources.get(GRADERS_KEY, "default") != "default":
        return resolved
    settings = resolved.settings
    grading = settings.grading.model_copy(update={"evaluation_graders": EVAL_GRADERS})
    return replace(
        resolved,
        settings=settings.model_copy(update={"grading": grading}),
        sources={**resolved.sources, GRADERS_KEY: "eval default"},
    )


def run_settings(settings: Settings, *, solve: bool) -> dict[str, Any]:
    """The settings that decide how a run of an evaluation is solved and graded. They are
    fixed for an evaluation directory: a resumed run keeps the settings it started with, so a
    change would mix runs made differently under one header."""
    fixed: dict[str, Any] = {
        "graders": settings.grading.evaluation_graders,
        "reconcile_spread": settings.grading.reconcile_spread,
        "reconcile": settings.grading.reconcile,
        "aggregation": settings.grading.aggregation,
        "scale": settings.grading.scale,
        "draft_scheme": settings.grading.draft_scheme,
        "model": settings.model,
    }
    if solve:
        fixed |= {
            "candidates": settings.candidates,
            "verifications": settings.acceptance.verifications,
            "accept": settings.acceptance.accepted_needed,
            "max_calls": settings.budget.calls,
            "max_tokens": settings.budget.total_tokens,
            "max_wall": settings.budget.wall_clock_s,
        }
    return fixed


def _changed(before: dict[str, Any], now: dict[str, Any]) -> str:
    """The settings that differ, as "name was X, now Y" (empty when none)."""
    return ", ".join(
        f"{name} was {before[name]}, now {now.get(name)}"
        for name in sorted(before)
        if name in now and before[name] != now[name]
    )


def prepare_out(
    out_dir: Path,
    identity: dict[str, Any],
    *,
    kind: str,
    extra: dict[str, Any],
    settings: dict[str, Any],
) -> dict[str, Any]:
    """Create OUT/EVAL.json, or check that OUT holds an evaluation of the same input made
    with the same ``settings`` (see :func:`run_settings`; InputError otherwise).
    Returns the directory names of the items (kept from the first invocation)."""
    path = out_dir / EVAL_FILE
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir}: exists and is not a directory")
    if path.is_file():
        try:
            existing = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"{path}: unreadable ({exc}); use another --out") from None
        if existing.get("kind") != kind or existing.get("input") != identity:
            raise InputError(
                f"{out_dir}: holds an evaluation of {_other_input(existing)}, not of this "
                "input; use another --out"
            )
        # A directory from before settings were recorded still names its G.
        before = existing.get("settings") or {
            "graders": existing.get("graders", settings["graders"])
        }
        changed = _changed(before, settings)
        if changed:
            raise InputError(
                f"{out_dir}: its runs were made with other settings ({changed}); "
                "repeat the first command's settings or use another --out"
            )
        names: dict[str, str] = existing["dirs"]
        data = {**existing, **extra, "settings": {**settings, **before}}
    else:
        if out_dir.is_dir() and any(out_dir.iterdir()):
            raise InputError(f"{out_dir}: not empty and not an evaluation; use another --out")
        names = directory_names(list(identity["items"]))
        data = {
            "format": EVAL_FORMAT,
            "kind": kind,
            "input": identity,
            "dirs": names,
            **extra,
            "settings": settings,
        }
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True).encode() + b"\n")
    return names


def _other_input(existing: dict[str, Any]) -> str:
    """What an output folder's evaluation was of, in words: its set or file (as it was
    named then) and the digest of its content; an evaluation of the same path whose file has
    changed since reads as such."""
    named = existing.get("set_path") or existing.get("file")
    what = {"set": "the set", "calibration": "the graded file"}.get(
        str(existing.get("kind")), "another input"
    )
    source = existing.get("input")
    digest = source.get("digest") if isinstance(source, dict) else None
    shown = f"{what} {named}" if isinstance(named, str) and named else what
    if isinstance(digest, str) and digest:
        shown += f" (content {digest.removeprefix('sha256:')[:12]})"
    return shown


def _read_result(run_dir: Path) -> dict[str, Any]:
    try:
        loaded = json.loads((run_dir / "final" / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(
            f"{run_dir}: finished, but final/result.json is unreadable: {exc}"
        ) from None
    return loaded if isinstance(loaded, dict) else {}


def looks_finished(run_dir: Path) -> bool:
    """A cheap look for the plan line: does the journal's tail hold run.finished?
    (final/result.json alone is not enough: it is written just before that record.)"""
    journal = run_dir / "journal.jsonl"
    try:
        with journal.open("rb") as handle:
            handle.seek(max(journal.stat().st_size - 65536, 0))
            return b'"type":"run.finished"' in handle.read()
    except OSError:
        return False


def finished_result(run_dir: Path) -> dict[str, Any] | None:
    """final/result.json of a finished run, or None when the run has not finished."""
    if not (run_dir / "MANIFEST.json").is_file():
        return None
    _, state = read_state(run_dir)
    return _read_result(run_dir) if state.phase == "finished" else None


async def drive_job(
    job: Job,
    resolved: ResolvedSettings,
    argv: list[str],
    make_progress: ProgressFactory = quiet_progress,
    capacity: SharedCapacity | None = None,
) -> JobResult:
    """Bring one run to its finish: read it if finished, resume it if started, else start it.
    An error of this run is returned, not raised, so the other runs go on."""
    run_dir = job.run_dir
    try:
        done = finished_result(run_dir)
        if done is not None:
            return JobResult(job, "finished", done, skipped=True)
        outcome: RunOutcome
        if (run_dir / "MANIFEST.json").is_file():
            outcome = await resume_run(
                run_dir,
                resolved,
                allow_model_change=False,
                argv=argv,
                make_progress=make_progress,
                capacity=capacity,
            )
            return JobResult(job, "finished", outcome.result.to_json(), resumed=True)
        if run_dir.is_dir() and not holds_only_create_leftovers(run_dir):
            raise InputError(
                f"{run_dir}: holds files but no MANIFEST.json (a start cut short); "
                "remove the directory to start this run again"
            )
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        outcome = await start_run(
            job.problem,
            None,
            resolved,
            evaluation=True,
            argv=argv,
            make_progress=make_progress,
            on_created=lambda _: None,
            run_dir=run_dir,
            given_proof=job.given_proof,
            rival_proofs=job.rival_proofs,
            capacity=capacity,
        )
        return JobResult(job, "finished", outcome.result.to_json())
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # one failed run must not stop the evaluation
        message = str(exc) or type(exc).__name__
        if not isinstance(exc, SolverError) and exit_code_for(exc) == 1:
            message = f"{type(exc).__name__}: {message}"
        return JobResult(job, "error", {}, error=eval_hint(message), exit_code=exit_code_for(exc))


def eval_hint(message: str) -> str:
    """A run's error inside an evaluation: it is continued by the same `solver eval`
    command (which resumes it with the others), not by `solver resume`."""
    return _RESUME_HINT.sub("the same `solver eval` command", message)


_RESUME_HINT = re.compile(r"`solver resume[^`]*`")


async def drive_jobs(
    jobs: list[Job],
    resolved: ResolvedSettings,
    *,
    concurrency: int,
    argv: list[str],
    on_result: Callable[[JobResult], None],
    monitor: EvalMonitor | None = None,
    capacity: SharedCapacity | None = None,
) -> list[JobResult]:
    """Drive every job, at most ``concurrency`` runs at once; ``on_result`` sees each end.

    The set-level scheduler: the runs in progress share ``concurrency`` x the settings'
    per-run concurrency model calls in flight (or ``capacity``'s slots). A run that reached
    its accepted quota, or finished, gives its slots to the runs still solving instead of
    holding a fixed share."""
    gate = asyncio.Semaphore(concurrency)
    shared = capacity or SharedCapacity(concurrency * resolved.settings.concurrency)

    async def one(job: Job) -> JobResult:
        label = f"{job.key} run {job.run}"
        async with gate:
            factory = monitor.factory(label) if monitor else quiet_progress
            result = await drive_job(job, resolved, argv, factory, shared)
        if monitor is not None:
            monitor.ended(label)
        on_result(result)
        return result

    tasks: list[Awaitable[JobResult]] = [one(job) for job in jobs]
    return list(await asyncio.gather(*tasks))
