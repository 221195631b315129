"""`solver solve`, `solver resume`, `solver status`: start, continue and inspect runs."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape

from solver._util.masking import mask_url, url_problem
from solver._util.terminal import visible
from solver.cli.errors import reports_errors
from solver.cli.options import (
    connection_flags,
    connection_options,
    search_flags,
    search_options,
)
from solver.cli.progress import JsonProgress, LiveProgress, ProgressBase
from solver.config import ResolvedSettings, Settings, resolve_settings
from solver.errors import EXIT_INTERRUPTED, InputError, Interrupted
from solver.loop.engine import RunProgress
from solver.loop.policy import PolicyConfig
from solver.loop.state import RunState
from solver.problems import read_problem
from solver.run import (
    RunOutcome,
    policy_config,
    preflight,
    read_manifest,
    resume_run,
    run_status,
    settings_of_run,
    start_run,
)
from solver.store import RunReader

T = TypeVar("T")


def run_interruptibly(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine; the first Ctrl-C or SIGTERM cancels it (the run records the
    interruption and stays resumable), a second one exits at once."""

    async def main() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        hits = 0

        def on_signal() -> None:
            nonlocal hits
            hits += 1
            if hits == 1:
                click.echo("\ninterrupting: finishing the record in hand ...", err=True)
                task.cancel()
            else:
                os._exit(EXIT_INTERRUPTED)

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        try:
            return await make()
        except asyncio.CancelledError:
            raise Interrupted(
                "interrupted; the run is kept and can be continued with `solver resume`"
            ) from None

    return asyncio.run(main())


def _progress_factory(
    as_json: bool,
    budget: dict[str, Any],
    holder: list[ProgressBase],
    policy: PolicyConfig | None = None,
) -> Callable[[RunState, Callable[[], float]], RunProgress]:
    def make(state: RunState, elapsed: Callable[[], float]) -> RunProgress:
        progress: ProgressBase
        if as_json:
            progress = JsonProgress(state, budget, elapsed, policy=policy)
        else:
            live = LiveProgress(state, budget, elapsed, policy=policy)
            live.__enter__()
            progress = live
        holder.append(progress)
        return progress

    return make


def _close_progress(holder: list[ProgressBase]) -> None:
    for progress in holder:
        if isinstance(progress, LiveProgress):
            progress.__exit__(None, None, None)


def _grade_text(score: object) -> str:
    """A grader that was cut off or unreadable gave no grade: say so rather than "None/7"."""
    return "ungraded" if score is None else f"grade {score}/7"


def _print_outcome(outcome: RunOutcome, as_json: bool) -> None:
    if as_json:
        click.echo(
            json.dumps(
                {
                    "event": "run.finished",
                    "run_dir": str(outcome.run_dir),
                    **outcome.result.to_json(),
                },
                sort_keys=True,
            )
        )
        return
    r = outcome.result
    console = Console()
    console.print(f"[bold]outcome:[/bold] {escape(visible(str(r.outcome)))}")
    # the sentence for people; a run made before it was written has the policy's words only
    console.print(escape(visible(str(r.explanation or r.reason))))
    if r.selected is not None:
        sel = r.selected
        console.print(
            f"selected {sel.lineage} v{sel.version} "
            f"({'accepted' if sel.accepted else 'not accepted'}); {_grade_text(r.score)}"
        )
    if r.evaluation_score is not None:
        console.print(f"evaluation grade: {r.evaluation_score}/7")
    if r.answer_check:
        console.print(f"answer check: {escape(visible(str(r.answer_check['verdict'])))}")
    console.print(f"{r.calls.total} calls, {r.tokens.total} tokens, {r.wall_s:.1f} s")
    console.print(f"proof:  {outcome.run_dir / 'final' / 'proof.md'}")
    console.print(f"result: {outcome.run_dir / 'final' / 'result.json'}")
    console.print(f"audit:  solver audit {outcome.run_dir}")


@click.command("solve")
@click.argument("problem_path", metavar="PROBLEM", type=click.Path(path_type=Path))
@connection_options(per_run=False)
@search_options(per_run=False)
@click.option("--runs-dir", type=click.Path(path_type=Path), help="Where runs go (runs/).")
@click.option("--run-dir", type=click.Path(path_type=Path), help="Exact directory of this run.")
@click.option("--blind", is_flag=True, help="No evaluation grading even with a reference.")
@click.option("--seed", type=int, help="Seed for the selector's shuffle.")
@reports_errors
def solve(
    problem_path: Path,
    endpoint: str | None,
    model: str | None,
    api: str | None,
    candidates: int | None,
    concurrency: int | None,
    verifications: int | None,
    accepted_needed: int | None,
    max_calls: int | None,
    max_total_tokens: int | None,
    max_wall: float | None,
    runs_dir: Path | None,
    run_dir: Path | None,
    config_file: Path | None,
    blind: bool,
    seed: int | None,
    as_json: bool,
) -> None:
    """Solve PROBLEM (.md, .txt or .tex) with the six-role loop; prints the run directory
    first, live progress, then the outcome."""
    if run_dir is not None and (run_dir / "MANIFEST.json").exists():
        raise InputError(
            f"{run_dir}: already holds a run; continue it with `solver resume {run_dir}`"
        )
    read = read_problem(problem_path)
    for warning in read.warnings:
        click.echo(f"warning: {warning}", err=True)
    problem = read.problem
    resolved = resolve_settings(
        config_file=config_file,
        flags={
            **connection_flags(endpoint=endpoint, model=model, api=api, concurrency=concurrency),
            **search_flags(
                candidates=candidates,
                verifications=verifications,
                accepted_needed=accepted_needed,
                max_calls=max_calls,
                max_total_tokens=max_total_tokens,
                max_wall=max_wall,
            ),
            "runs_dir": runs_dir,
            "seed": seed,
        },
    )
    evaluation = not blind and bool(problem.reference_solution or problem.grading_guidelines)
    # settings the policy cannot take, then the endpoint: both before the run is written
    policy_config(resolved.settings, evaluation=evaluation, material=False)
    run_interruptibly(lambda: preflight(resolved.settings, [problem]))
    holder: list[ProgressBase] = []

    def created(path: Path) -> None:
        if as_json:
            click.echo(json.dumps({"event": "run.created", "run_dir": str(path)}))
        else:
            click.echo(f"run: {path}")
        sys.stdout.flush()

    try:
        outcome = run_interruptibly(
            lambda: start_run(
                problem,
                problem_path,
                resolved,
                evaluation=evaluation,
                argv=sys.argv[1:],
                make_progress=_progress_factory(
                    as_json, _budget(resolved), holder, _policy(resolved.settings)
                ),
                on_created=created,
                run_dir=run_dir,
            )
        )
    finally:
        _close_progress(holder)
    _print_outcome(outcome, as_json)


def _budget(resolved: ResolvedSettings) -> dict[str, Any]:
    b = resolved.settings.budget
    return {"wall_s": b.wall_clock_s, "tokens": b.total_tokens, "calls": b.calls}


def _policy(settings: Settings) -> PolicyConfig | None:
    """The acceptance rules the progress view counts by; None (its defaults) where the
    settings are refused, which the run itself then reports."""
    try:
        return policy_config(settings, evaluation=False, material=True)
    except InputError:
        return None


def _run_policy(run_dir: Path, resolved_now: ResolvedSettings) -> PolicyConfig | None:
    if not (run_dir / "MANIFEST.json").is_file():
        return None  # resume_run reports the missing run
    manifest = read_manifest(RunReader(run_dir).manifest, run_dir)
    return _policy(settings_of_run(manifest, resolved_now))


def _run_budget(run_dir: Path, resolved_now: ResolvedSettings) -> dict[str, Any]:
    """The budget a run was started with (its manifest), not today's configuration."""
    if not (run_dir / "MANIFEST.json").is_file():
        return _budget(resolved_now)  # resume_run reports the missing run
    manifest = read_manifest(RunReader(run_dir).manifest, run_dir)
    settings = settings_of_run(manifest, resolved_now)
    return _budget(ResolvedSettings(settings, resolved_now.sources, resolved_now.config_file))


@click.command("resume")
@click.argument("run_dir", metavar="RUN", type=click.Path(path_type=Path))
@click.option("--allow-model-change", is_flag=True, help="Go on even if the served model changed.")
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="For the API key.")
@click.option(
    "--endpoint",
    "moved_to",
    help="The run's server moved (another port or node): continue there (recorded).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@reports_errors
def resume(
    run_dir: Path,
    allow_model_change: bool,
    config_file: Path | None,
    moved_to: str | None,
    as_json: bool,
) -> None:
    """Continue RUN after a crash, kill, reboot or Ctrl-C. Completed calls are never repeated.

    The API key comes from today's environment or config (a run never stores it) and is
    sent only to the endpoint this session names: the run's own, or --endpoint URL."""
    if moved_to is not None:
        problem = url_problem(moved_to)
        if problem is not None:
            raise InputError(f"--endpoint {mask_url(moved_to)}: {problem}")
    resolved = resolve_settings(config_file=config_file)
    budget = _run_budget(run_dir, resolved)
    holder: list[ProgressBase] = []
    try:
        outcome = run_interruptibly(
            lambda: resume_run(
                run_dir,
                resolved,
                allow_model_change=allow_model_change,
                argv=sys.argv[1:],
                make_progress=_progress_factory(
                    as_json, budget, holder, _run_policy(run_dir, resolved)
                ),
                endpoint=moved_to,
            )
        )
    finally:
        _close_progress(holder)
    if outcome.already_finished:
        _print_already_finished(outcome, as_json)
        return
    _print_outcome(outcome, as_json)


def _print_already_finished(outcome: RunOutcome, as_json: bool) -> None:
    """`solver resume` of a finished run: one line, nothing was sent or recorded."""
    r = outcome.result
    if as_json:
        shown = {"event": "run.already_finished", "run_dir": str(outcome.run_dir), **r.to_json()}
        click.echo(json.dumps(shown, sort_keys=True))
        return
    chosen = ""
    if r.selected is not None:
        verdict = "accepted" if r.selected.accepted else "not accepted"
        chosen = f", {r.selected.lineage} v{r.selected.version} {verdict}, {_grade_text(r.score)}"
    where = visible(str(outcome.run_dir))
    click.echo(
        f"{where}: already finished ({visible(str(r.outcome))}{chosen}); nothing to resume. "
        f"Read it with `solver report {where}`"
    )


@click.command("status")
@click.argument("run_dir", metavar="RUN", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@reports_errors
def status(run_dir: Path, as_json: bool) -> None:
    """Show whether RUN is running, interrupted, crashed or finished, with its totals.
    Takes no lock: safe while the run is going."""
    info = run_status(run_dir)
    if as_json:
        click.echo(json.dumps(info, sort_keys=True))
        return
    console = Console()
    # the lock file and the journal are the run's, which may be hostile: no markup, no escapes
    console.print(f"[bold]{escape(visible(str(info['state'])))}[/bold]  {escape(str(run_dir))}")
    for key in (
        "phase",
        "outcome",
        "sessions",
        "calls",
        "in_flight",
        "accepted",
        "tokens",
        "wall_s",
        "last_activity",
        "holder",
    ):
        if info.get(key) not in (None, ""):
            console.print(f"  {key}: {escape(visible(str(info[key])))}")
