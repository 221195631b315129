"""`solver eval SET`, `solver eval calibrate FILE` and `solver eval proofs SOURCE...` (layout:
solver/evaluation/evaluate.py)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from solver.cli.errors import reports_errors
from solver.cli.options import (
    connection_flags,
    connection_options,
    search_flags,
    search_options,
)
from solver.cli.run import run_interruptibly
from solver.config import ResolvedSettings
from solver.errors import EXIT_AUDIT, EXIT_ERROR, InputError, Interrupted
from solver.evaluation import (
    EVAL_GRADERS,
    EXPORT_CHOICES,
    EvalMonitor,
    EvalSummary,
    Job,
    JobResult,
    Shard,
    Written,
    calibration_figures,
    calibration_header,
    calibration_report,
    claim_eval_file,
    collect_proofs,
    default_out_dir,
    drive_jobs,
    eval_settings,
    file_digest,
    load_graded,
    merge_set,
    plan_calibration,
    plan_counts,
    plan_set,
    score_line,
    shard_jobs,
    verification_lines,
    write_calibration,
    write_proofs,
    write_set_results,
    write_shard_state,
)
from solver.loop.engine import AttemptFailure
from solver.problems import Problem, load_problem_set
from solver.run import preflight


def _corr(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


class _DefaultToRun(click.Group):
    """`solver eval SET ...` means `solver eval run SET ...`; subcommands keep their names."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


def _common(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options of every evaluation: its grading, its runs and the shared connection."""
    options: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
        click.option(
            "--graders",
            type=click.IntRange(1, 15),
            help="G: independent graders of each final proof [default: "
            f"grading.evaluation_graders of the configuration file, else {EVAL_GRADERS}].",
        ),
        click.option(
            "--aggregation",
            type=click.Choice(["min", "median", "mean"]),
            help="How graders' grades make the evaluation grade [grading.aggregation; min].",
        ),
        click.option(
            "--reconcile",
            type=click.Choice(["rejudge", "off"]),
            help="When graders disagree, each re-grades with the others' judgments in view "
            "[grading.reconcile; rejudge].",
        ),
        click.option(
            "--scale",
            type=click.Choice(["points", "proofbench"]),
            help="0-7 points, or IMO-ProofBench's 7/6/1/0 [grading.scale; points].",
        ),
        click.option(
            "--concurrency-problems",
            "parallel",
            type=click.IntRange(1, 256),
            default=4,
            show_default=True,
            help="Runs in progress at once.",
        ),
        click.option(
            "--out",
            "out_dir",
            type=click.Path(path_type=Path),
            help="Evaluation directory (default evals/<name>).",
        ),
        connection_options(per_run=True),
        click.option(
            "--progress-every",
            type=click.FloatRange(min=0),
            default=60.0,
            show_default=True,
            help="Seconds between summaries of the runs in flight (0: none).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _resolve(config_file: Path | None, flags: dict[str, Any]) -> ResolvedSettings:
    """The eval's settings from its flags (settings keys; None: not given)."""
    return eval_settings(config_file, flags)


def _grading_flags(
    graders: int | None, aggregation: str | None, reconcile: str | None, scale: str | None
) -> dict[str, Any]:
    """The settings keys of :func:`_common`'s grading options (None: not given)."""
    return {
        "grading.evaluation_graders": graders,
        "grading.aggregation": aggregation,
        "grading.reconcile": reconcile,
        "grading.scale": scale,
    }


def _emit(as_json: bool, event: dict[str, Any], text: str, *, result: bool = False) -> None:
    """One event: a JSON line on stdout with ``--json``; else its text, on stderr for
    progress and on stdout for a ``result`` (what a script reads: scores and files)."""
    if as_json:
        click.echo(json.dumps(event, sort_keys=True))
    else:
        click.echo(text, err=not result)


def _failure_reporter(as_json: bool) -> Callable[[str, AttemptFailure], None]:
    """Says at once that an attempt of a run failed, and on which worker behind a gateway."""

    def report(label: str, failure: AttemptFailure) -> None:
        where = f" on {failure.worker}" if failure.worker else ""
        then = "retryable" if failure.retryable else "not retryable"
        event: dict[str, Any] = {
            "event": "attempt.failed",
            "run": label,
            "call": failure.call_id,
            "attempt": failure.attempt,
            "error": failure.error_kind,
            "retryable": failure.retryable,
        }
        if failure.worker:
            event["worker"] = failure.worker
        text = f"{label}: attempt {failure.attempt} of {failure.call_id} failed{where} "
        _emit(as_json, event, text + f"({failure.error_kind}; {then})")

    return report


def _plan_line(jobs: Sequence[Job]) -> str:
    done, started, fresh = plan_counts(jobs)
    return f"{len(jobs)} runs: {done} finished, {started} to resume, {fresh} to start"


def _drive(
    jobs: list[Job],
    resolved: ResolvedSettings,
    parallel: int,
    as_json: bool,
    label: Callable[[Job], str],
    progress_every: float,
) -> list[JobResult]:
    count = [0]

    def on_result(result: JobResult) -> None:
        count[0] += 1
        job, grade, outcome = result.job, result.grade, result.outcome
        shown = f"{grade}/7" if grade is not None else "ungraded" if result.has_proof else "-"
        detail = (
            f"{outcome}, grade {shown} ({result.how})"
            if result.status == "finished"
            else f"{result.status}: {result.error}"
        )
        _emit(
            as_json,
            {
                "event": "run.finished",
                "item": job.key,
                "run": job.run,
                "status": result.status,
                "outcome": outcome,
                "grade": grade,
                "skipped": result.skipped,
                "run_dir": str(job.run_dir),
                "error": result.error,
            },
            f"[{count[0]}/{len(jobs)}] {label(job)}: {detail}  {job.run_dir}",
        )

    def on_progress(snapshot: dict[str, Any]) -> None:
        running = "; ".join(
            f"{label}: {r['phase']}, {r['calls']} calls, {r['tokens']} tok"
            for label, r in snapshot["running"].items()
        )
        _emit(
            as_json,
            {"event": "eval.progress", **snapshot},
            f"[{snapshot['finished']}/{snapshot['total']}] running: {running or '-'}",
        )

    monitor = EvalMonitor(len(jobs), progress_every, on_progress, _failure_reporter(as_json))
    try:
        return run_interruptibly(
            lambda: drive_jobs(
                jobs,
                resolved,
                concurrency=parallel,
                argv=sys.argv[1:],
                on_result=on_result,
                monitor=monitor,
            )
        )
    except Interrupted:
        # the shared handler advises `solver resume`, which continues one run; an evaluation
        # continues all of its runs when the same command is run again
        raise Interrupted(
            "interrupted; the runs are kept: run the same `solver eval` command again to continue"
        ) from None


def _exit_on_errors(results: list[JobResult], as_json: bool) -> None:
    failed = [r for r in results if r.status != "finished"]
    if failed:
        first = failed[0]
        _emit(
            as_json,
            {"event": "eval.incomplete", "failed": len(failed)},
            f"error: {len(failed)} run(s) did not finish (first: {first.job.run_dir}: "
            f"{first.error}); run the same command again to continue",
        )
        sys.exit(first.exit_code or 1)


def _means_line(summary: EvalSummary) -> str:
    """The totals' means, or why there are none (a 0 would read as a real score)."""
    rubric, strict, top = summary.rubric_total, summary.strict_total, summary.max_total
    if rubric is None or strict is None:
        return "no complete run: no run index has finished on every problem"
    return f"rubric mean {rubric.mean:.2f}/{top}, strict mean {strict.mean:.2f}/{top}"


def _set_finished(summary: EvalSummary, written: Written, runs: int, as_json: bool) -> None:
    """The closing lines of a set evaluation: each run index's score, the means, the files."""
    json_path, md_path, png_path = written.json_path, written.md_path, written.png_path
    if written.chart_note is not None:
        # stderr in both modes: with --json, stdout stays one JSON object per line.
        click.echo(f"warning: no chart: {written.chart_note}", err=True)
    lines = [f"run {n}: {score_line(summary, n, strict=False)}" for n in range(1, runs + 1)]
    strict = summary.strict_total
    rubric = summary.rubric_total
    _emit(
        as_json,
        {
            "event": "eval.finished",
            "results": str(json_path),
            "markdown": str(md_path),
            "chart": str(png_path) if png_path else None,
            "chart_note": written.chart_note,
            "rubric": rubric.to_json() if rubric else None,
            "strict": strict.to_json() if strict else None,
            "max": summary.max_total,
        },
        "\n".join(
            [
                *lines,
                _means_line(summary),
                f"results: {json_path}  {md_path}  {png_path or '(no chart)'}",
            ]
        ),
        result=True,
    )


@click.group(
    "eval",
    cls=_DefaultToRun,
    subcommand_metavar="SET [OPTIONS] | calibrate FILE [OPTIONS] | proofs SOURCE... --out FILE",
    context_settings={"help_option_names": ["-h", "--help"]},
)
def eval_group() -> None:
    """Score a whole problem set like a competition (`solver eval SET`), measure the
    graders against human grades (`solver eval calibrate FILE`), or write runs' proofs for
    humans to grade (`solver eval proofs RUN --out FILE`)."""


@eval_group.command("run")
@click.argument("set_path", metavar="SET", type=click.Path(path_type=Path))
@click.option(
    "--runs",
    type=click.IntRange(1, 1000),
    default=1,
    show_default=True,
    help="N: runs of every problem (mean and spread are over these).",
)
@search_options(per_run=True)
@click.option("--map", "mapping", multiple=True, help="Column mapping FIELD=COLUMN for the set.")
@click.option(
    "--shard",
    "shard_spec",
    metavar="K/N",
    help="Run only part K of N of the set's runs (K from 0: run i is part i mod N), so N "
    "machines share one --out on shared storage; then `solver eval merge OUT` (docs/eval.md).",
)
@_common
@reports_errors
def run(
    set_path: Path,
    runs: int,
    candidates: int | None,
    verifications: int | None,
    accepted_needed: int | None,
    max_calls: int | None,
    max_total_tokens: int | None,
    max_wall: float | None,
    mapping: tuple[str, ...],
    shard_spec: str | None,
    graders: int | None,
    aggregation: str | None,
    reconcile: str | None,
    scale: str | None,
    parallel: int,
    concurrency: int | None,
    out_dir: Path | None,
    endpoint: str | None,
    model: str | None,
    api: str | None,
    config_file: Path | None,
    as_json: bool,
    progress_every: float,
) -> None:
    """Solve every problem of SET N times (one run directory per problem and run), grade each
    final proof with G graders in evaluation mode, and write OUT/results.json, results.md and
    results.png. Running the same command again continues where it stopped."""
    from solver.problems import parse_mapping

    shard = Shard.parse(shard_spec) if shard_spec is not None else None
    problem_set = load_problem_set(set_path, mapping=parse_mapping(mapping) if mapping else None)
    for warning in problem_set.warnings:
        click.echo(f"warning: {warning}", err=True)
    if problem_set.mapping_note:
        click.echo(f"note: {problem_set.mapping_note}", err=True)
    resolved = _resolve(
        config_file,
        {
            **connection_flags(endpoint=endpoint, model=model, api=api, concurrency=concurrency),
            **search_flags(
                candidates=candidates,
                verifications=verifications,
                accepted_needed=accepted_needed,
                max_calls=max_calls,
                max_total_tokens=max_total_tokens,
                max_wall=max_wall,
            ),
            **_grading_flags(graders, aggregation, reconcile, scale),
        },
    )
    # the endpoint is checked before any run of the set is made
    run_interruptibly(lambda: preflight(resolved.settings, problem_set.problems))
    out = out_dir or default_out_dir(set_path)
    if shard is not None:
        claim_shared_out(set_path, list(problem_set.problems), out)
    plan = plan_set(set_path, list(problem_set.problems), runs, out, resolved)
    jobs = list(plan.jobs) if shard is None else list(shard_jobs(plan.jobs, shard))
    if shard is not None:
        _shard_started(plan.out_dir, shard, jobs, as_json)
    else:
        _emit(
            as_json,
            {"event": "eval.started", "out": str(plan.out_dir), "runs": len(plan.jobs)},
            f"eval: {plan.out_dir}: {len(plan.problems)} problems x {runs}; "
            f"{_plan_line(plan.jobs)}",
        )
    results = _drive(
        jobs,
        resolved,
        parallel,
        as_json,
        lambda j: f"{j.key} run {j.run}",
        progress_every,
    )
    if shard is not None:
        _shard_finished(plan.out_dir, shard, results, as_json)
    else:
        summary, written = write_set_results(plan, results, resolved.settings)
        _set_finished(summary, written, runs, as_json)
    _exit_on_errors(results, as_json)


def claim_shared_out(set_path: Path, problems: Sequence[Problem], out: Path) -> None:
    """Before the first shard's prepare_out: EVAL.json created once, exclusively."""
    identity = {"digest": file_digest(set_path), "items": [p.id for p in problems]}
    claim_eval_file(out, identity, "set")


def _shard_started(out: Path, shard: Shard, jobs: Sequence[Job], as_json: bool) -> None:
    _emit(
        as_json,
        {"event": "eval.started", "out": str(out), "runs": len(jobs), "shard": shard.name},
        f"eval: {out}: shard {shard.index}/{shard.count}, {len(jobs)} runs; {_plan_line(jobs)}",
    )


def _shard_finished(out: Path, shard: Shard, results: list[JobResult], as_json: bool) -> None:
    path = write_shard_state(out, shard, results)
    done = sum(r.status == "finished" for r in results)
    _emit(
        as_json,
        {
            "event": "shard.finished",
            "shard": shard.name,
            "finished": done,
            "runs": len(results),
            "state": str(path),
        },
        f"shard {shard.index}/{shard.count}: {done}/{len(results)} runs finished ({path}); "
        f"when every shard has: solver eval merge {out}",
    )


@eval_group.command("merge")
@click.argument("out", metavar="OUT", type=click.Path(path_type=Path))
@click.option(
    "--set",
    "set_path",
    type=click.Path(path_type=Path),
    help="The set file, where it is on this machine [the path EVAL.json records].",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@reports_errors
def merge(out: Path, set_path: Path | None, as_json: bool) -> None:
    """Score and write up a set evaluated in shards (`solver eval SET --shard K/N --out
    OUT` on N machines): results.json, .md and .png of every run in OUT, and the audit of
    each. Exits 1 while a run is unfinished (naming its shard: run that shard's command
    again; exit 1) or an audit fails (exit 4)."""
    report = merge_set(out, set_path)
    _set_finished(report.summary, report.written, report.plan.runs, as_json)
    for job, owner in report.unfinished:
        whose = f" (shard {owner})" if owner is not None else ""
        _emit(
            as_json,
            {
                "event": "run.unfinished",
                "item": job.key,
                "run": job.run,
                "shard": owner,
                "run_dir": str(job.run_dir),
            },
            f"unfinished: {job.key} run {job.run}{whose}: {job.run_dir}",
        )
    for job, why in report.audit_failed:
        _emit(
            as_json,
            {
                "event": "audit.failed",
                "item": job.key,
                "run": job.run,
                "detail": why,
                "run_dir": str(job.run_dir),
            },
            f"audit FAILED: {job.key} run {job.run}: {why}",
        )
    total = len(report.plan.jobs)
    ok = not report.unfinished and not report.audit_failed
    _emit(
        as_json,
        {
            "event": "merge.finished",
            "finished": report.finished,
            "runs": total,
            "audited": report.finished,
            "audit_failed": len(report.audit_failed),
            "ok": ok,
        },
        f"merge: {report.finished}/{total} runs finished; "
        f"{report.finished - len(report.audit_failed)}/{report.finished} audits pass",
    )
    if report.audit_failed:
        sys.exit(EXIT_AUDIT)
    if report.unfinished:
        sys.exit(EXIT_ERROR)


@eval_group.command("calibrate")
@click.argument("file", metavar="FILE", type=click.Path(path_type=Path))
@click.option(
    "--verifications",
    type=click.IntRange(0, 64),
    help="Also verify each proof this many times with each verifier variant, and measure "
    "the variants against the humans [grading.given_verifications; 0].",
)
@click.option(
    "--comparisons/--no-comparisons",
    default=None,
    help="Also compare each proof with the later proofs of its problem that humans graded "
    "differently, both ways, with the pairwise selector, and measure how often it chooses "
    "the better [grading.given_comparisons; off].",
)
@_common
@reports_errors
def calibrate(
    file: Path,
    verifications: int | None,
    comparisons: bool | None,
    graders: int | None,
    aggregation: str | None,
    reconcile: str | None,
    scale: str | None,
    parallel: int,
    concurrency: int | None,
    out_dir: Path | None,
    endpoint: str | None,
    model: str | None,
    api: str | None,
    config_file: Path | None,
    as_json: bool,
    progress_every: float,
) -> None:
    """Grade proofs that already carry human grades (JSON Lines, e.g. DeepSeekMath-V2's
    outputs) and report agreement with the humans: exact, within one point, Pearson and
    Spearman correlation, and every disagreement; with --verifications, each verifier
    variant's fails, blind spots and their correlation as well. Writes OUT/calibration.json
    and .md."""
    items = load_graded(file)
    resolved = _resolve(
        config_file,
        {
            **connection_flags(endpoint=endpoint, model=model, api=api, concurrency=concurrency),
            **_grading_flags(graders, aggregation, reconcile, scale),
            "grading.given_verifications": verifications,
            "grading.given_comparisons": comparisons,
        },
    )
    out = out_dir or default_out_dir(file, "calibrate-")
    # the endpoint is checked before any grading run is made (no generator: no room check)
    run_interruptibly(lambda: preflight(resolved.settings, []))
    plan = plan_calibration(file, items, out, resolved.settings)
    jobs = list(plan.jobs)
    pairs = sum(len(job.rival_proofs) for job in jobs)
    # pairs grow with the square of a problem's proofs: say what the comparisons will cost
    compared = (
        f"; {pairs} pair(s) to compare, {2 * pairs} selector calls" if plan.comparisons else ""
    )
    _emit(
        as_json,
        {"event": "calibrate.started", "out": str(out), "items": len(jobs), "pairs": pairs},
        f"calibrate: {out}; {_plan_line(jobs)}{compared}",
    )
    results = _drive(jobs, resolved, parallel, as_json, lambda j: j.key, progress_every)
    agreed, rows = calibration_report(items, results, plan.verifications, plan.comparisons)
    header = calibration_header(plan, results)
    figures = calibration_figures(rows, plan.verifications)
    json_path, md_path = write_calibration(out, header, agreed, rows, figures)
    if agreed is None:
        text = "no grading run finished"
    else:
        text = (
            f"exact {agreed.exact:.1%}, within one {agreed.within_one:.1%}, "
            f"pearson {_corr(agreed.pearson)}, spearman {_corr(agreed.spearman)}, "
            f"{len(agreed.disagreements)} disagreement(s)"
        )
    text = "\n".join([text, *verification_lines(figures)])
    _emit(
        as_json,
        {
            "event": "calibrate.finished",
            "results": str(json_path),
            "markdown": str(md_path),
            "agreement": agreed.to_json() if agreed else None,
        },
        f"{text}\nresults: {json_path}  {md_path}",
        result=True,
    )
    _exit_on_errors(results, as_json)


@eval_group.command("proofs")
@click.argument(
    "sources", metavar="SOURCE...", nargs=-1, required=True, type=click.Path(path_type=Path)
)
@click.option(
    "--out",
    "out_file",
    required=True,
    type=click.Path(path_type=Path),
    help="The JSON Lines file to write (.jsonl); an existing file is never replaced.",
)
@click.option(
    "--versions",
    "which",
    type=click.Choice(EXPORT_CHOICES),
    default="chosen",
    show_default=True,
    help="chosen: every accepted version, each lineage's best and the selected proof; "
    "all: every version with a proof.",
)
@click.option(
    "--sheet",
    type=click.Path(path_type=Path),
    help="Also write the proofs as Markdown (.md) for people to read while they grade.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
@reports_errors
def proofs(
    sources: tuple[Path, ...], out_file: Path, which: str, sheet: Path | None, as_json: bool
) -> None:
    """Write the proofs of runs (run directories, or evaluation directories of `solver eval`)
    as JSON Lines for humans to grade: each line the problem, its reference solution and
    guidelines where it has them, one proof and an empty human_grade. No verdict, grade or
    choice of the machine is written, and lines are ordered by problem and proof digest, so
    a grader cannot tell which proof the run preferred. Graded, the file is what `solver eval
    calibrate FILE --verifications N --comparisons` measures the run's model with."""
    export = collect_proofs(list(sources), "all" if which == "all" else "chosen")
    if not export.proofs:
        raise InputError(
            f"no proofs in {export.runs} run(s) of {', '.join(map(str, sources))}; nothing written"
        )
    write_proofs(export, out_file, sheet)
    points = sorted({p.problem.points for p in export.proofs})
    scale = f"0-{points[0]}" if len(points) == 1 else "0 to each line's max_points"
    unfinished = f" ({export.unfinished} not finished)" if export.unfinished else ""
    text = (
        f"wrote {len(export.proofs)} proof(s) of {export.problems} problem(s) from "
        f"{export.runs} run(s){unfinished} to {out_file}"
        + (f" (to read: {sheet})" if sheet else "")
        + "\n"
        f"next: write each line's human_grade ({scale}), then "
        f"`solver eval calibrate {out_file} --verifications 8 --comparisons`"
    )
    event = {
        "event": "proofs.written",
        "out": str(out_file),
        "sheet": str(sheet) if sheet else None,
        "proofs": len(export.proofs),
        "problems": export.problems,
        "runs": export.runs,
        "unfinished": export.unfinished,
    }
    if as_json:
        click.echo(json.dumps(event, sort_keys=True))
    else:
        click.echo(text)
