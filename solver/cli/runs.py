"""`solver runs [DIR]`, `solver runs rm RUN...`, `solver runs prune [DIR] --older-than AGE`:
find runs, and remove old ones safely.

Listing takes no lock and never fails on a damaged run (it is listed as ``damaged``).
Removal removes nothing without ``--yes`` (it prints what it would remove), checks every run
named before it removes any, and refuses a running run (exit 75), a symlink or a directory
that is not a run (exit 2) and a missing one (exit 6).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from solver._util.terminal import json_visible, one_line, visible
from solver.cli.errors import reports_errors
from solver.errors import NotFound
from solver.run import RunRow, check_removable, list_runs, older_than, parse_age, remove_run

__all__ = ["runs"]

DEFAULT_RUNS_DIR = Path("runs")


class _ListByDefault(click.Group):
    """`solver runs [DIR]` lists; `solver runs rm|prune|list ...` are subcommands."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("-h", "--help")):
            args = ["list", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_ListByDefault, context_settings={"help_option_names": ["-h", "--help"]})
def runs() -> None:
    """List the runs under a runs directory (newest first), or remove old ones.

    `solver runs [DIR] [--json]` lists; `solver runs rm RUN... --yes` and
    `solver runs prune [DIR] --older-than 30d [--keep-solved] --yes` remove."""


def _runs_dir(directory: Path | None) -> Path:
    path = directory if directory is not None else DEFAULT_RUNS_DIR
    if not path.is_dir():
        raise NotFound(f"{path}: no such runs directory")
    return path


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _cell(value: object, limit: int = 60) -> str:
    # every cell comes from a run directory: one visible line, no escape sequences
    return one_line(str(value), limit) if value not in (None, "") else "-"


@runs.command("list")
@click.argument("directory", metavar="[DIR]", required=False, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run, newest first.")
@reports_errors
def list_command(directory: Path | None, as_json: bool) -> None:
    """List the runs under DIR (default: runs): problem, outcome, best grade, started,
    duration, tokens, status. Takes no lock; a damaged run is listed as damaged."""
    rows = list_runs(_runs_dir(directory))
    if as_json:
        for row in rows:
            click.echo(json_visible(json.dumps(row.to_json(), ensure_ascii=False)))
        return
    if not rows:
        click.echo(f"no runs in {visible(str(_runs_dir(directory)))}")
        return
    header = ("run", "problem", "outcome", "grade", "started", "took", "tokens", "status")
    lines = [header]
    for row in rows:
        status = row.status if row.status != "damaged" else f"damaged: {row.detail}"
        lines.append(
            (
                _cell(row.path.name),
                _cell(row.problem, 40),
                _cell(row.outcome),
                _cell(row.best_grade),
                _cell(row.started[:19].replace("T", " ") if row.started else None),
                _duration(row.wall_s),
                _cell(row.tokens),
                _cell(status, 100),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    for line in lines:
        cells = [cell.ljust(width) for cell, width in zip(line, widths, strict=False)]
        click.echo("  ".join([*cells, line[-1]]))


def _describe(row: RunRow) -> str:
    return (
        f"{visible(str(row.path))} ({visible(row.problem or '?')}, "
        f"{visible(row.outcome or row.status)}, started {row.started or '?'})"
    )


def _remove(rows: list[RunRow], yes: bool) -> None:
    if not yes:
        for row in rows:
            click.echo(f"would remove {_describe(row)}")
        click.echo(f"{len(rows)} run(s); nothing removed without --yes", err=True)
        return
    freed = 0
    for row in rows:
        size = remove_run(row.path)
        freed += size
        click.echo(f"removed {_describe(row)}: {size / 1e6:.1f} MB")
    click.echo(f"{len(rows)} run(s) removed, {freed / 1e6:.1f} MB freed", err=True)


@runs.command("rm")
@click.argument(
    "run_dirs", metavar="RUN...", nargs=-1, required=True, type=click.Path(path_type=Path)
)
@click.option("--yes", is_flag=True, help="Remove them (without it: say what would go).")
@reports_errors
def rm(run_dirs: tuple[Path, ...], yes: bool) -> None:
    """Remove the run directories RUN... Each must be a run directory itself (a valid
    MANIFEST.json, not a symlink) and not running; all are checked before any is removed."""
    rows = [check_removable(path) for path in run_dirs]
    _remove(rows, yes)


@runs.command("prune")
@click.argument("directory", metavar="[DIR]", required=False, type=click.Path(path_type=Path))
@click.option("--older-than", "age", required=True, help="Age of runs to remove: 30d, 12h, 2w.")
@click.option("--keep-solved", is_flag=True, help="Keep runs whose outcome is solved.")
@click.option("--yes", is_flag=True, help="Remove them (without it: say what would go).")
@reports_errors
def prune(directory: Path | None, age: str, keep_solved: bool, yes: bool) -> None:
    """Remove the runs under DIR (default: runs) started longer ago than --older-than.
    Running and damaged runs are never removed (a damaged one is named on stderr)."""
    cutoff = parse_age(age)
    chosen: list[RunRow] = []
    for row in list_runs(_runs_dir(directory)):
        if row.status == "damaged":
            click.echo(f"skipped {visible(str(row.path))}: damaged ({row.detail})", err=True)
        elif (
            row.status == "running"
            or not older_than(row, cutoff)
            or (keep_solved and row.outcome == "solved")
        ):
            continue
        else:
            chosen.append(check_removable(row.path))
    _remove(chosen, yes)
