"""`solver problem show PATH` and `solver problem set-info PATH`: inspect what the solver reads.

Bad input prints one line ``error: PATH: what is wrong`` on stderr and exits 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import ParamSpec, TypeVar

import click

from solver._util.terminal import json_visible, one_line, visible
from solver.cli.errors import reports_errors
from solver.problems import FORMATS, load_problem_set, parse_mapping, read_problem

__all__ = ["problem"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


@click.group()
def problem() -> None:
    """Inspect problem files and problem sets."""


@problem.command("show")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the parsed problem as JSON.")
@reports_errors
def show(path: Path, as_json: bool) -> None:
    """Show the parsed fields and the digest of the problem file PATH (.md, .txt or .tex),
    and the statement exactly as the model will get it."""
    read = read_problem(path)
    loaded = read.problem
    for warning in read.warnings:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        # the problem record as a run's manifest holds it (warnings went to stderr)
        shown = json.dumps(loaded.model_dump(mode="json"), ensure_ascii=False, indent=2)
        click.echo(json_visible(shown))
        return
    # Problem text is untrusted: its escape sequences are shown, never sent to the terminal.
    click.echo(f"id:       {visible(loaded.id)}")
    click.echo(f"digest:   {loaded.digest}")
    click.echo(f"file:     {loaded.original_digest} ({len(loaded.original_bytes)} bytes)")
    click.echo(f"points:   {loaded.points}")
    for label, value in (
        ("title", loaded.title),
        ("source", loaded.source),
        ("answer", loaded.answer),
    ):
        if value is not None:
            click.echo(f"{label + ':':<9} {visible(value)}")
    for key, value in loaded.metadata.items():
        click.echo(f"{visible(key)}: {visible(value)}")
    size = f"{len(loaded.statement)} characters"
    for label, value in (
        (f"statement (exactly what the model gets, {size})", loaded.statement),
        ("reference solution (graders only)", loaded.reference_solution),
        ("grading guidelines (graders only)", loaded.grading_guidelines),
    ):
        if value is not None:
            click.echo(f"\n{label}:\n{visible(value)}")


@problem.command("set-info")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "set_format",
    type=click.Choice(["auto", *FORMATS]),
    default="auto",
    show_default=True,
    help="The set's columns; auto detects the four published formats, else generic.",
)
@click.option(
    "--map",
    "mappings",
    multiple=True,
    metavar="FIELD=COLUMN",
    help="Read FIELD from COLUMN (repeatable), e.g. --map statement=Problem.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@reports_errors
def set_info(path: Path, set_format: str, mappings: tuple[str, ...], as_json: bool) -> None:
    """Count the problems of the set PATH (.csv, .jsonl or .json), name its format, list ids."""
    loaded = load_problem_set(
        path,
        format=None if set_format == "auto" else set_format,
        mapping=parse_mapping(mappings) or None,
    )
    for warning in loaded.warnings:
        click.echo(f"warning: {one_line(warning, 1000)}", err=True)
    if loaded.mapping_note:
        click.echo(f"note: {one_line(loaded.mapping_note, 1000)}", err=True)
    if as_json:
        summary = {
            "path": str(loaded.path),
            "format": loaded.format,
            "count": len(loaded),
            "digest": loaded.digest,
            "ids": list(loaded.ids),
            "with_answer": sum(1 for item in loaded if item.answer is not None),
            "with_reference_solution": sum(
                1 for item in loaded if item.reference_solution is not None
            ),
            "warnings": list(loaded.warnings),
            "mapping_note": loaded.mapping_note,
        }
        click.echo(json_visible(json.dumps(summary, ensure_ascii=False, indent=2)))
        return
    click.echo(f"format:   {loaded.format}")
    click.echo(f"count:    {len(loaded)}")
    click.echo(f"digest:   {loaded.digest}")
    click.echo("ids:")
    for problem_id in loaded.ids:
        click.echo(f"  {visible(problem_id)}")
