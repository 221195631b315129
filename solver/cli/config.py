"""`solver config show`: the resolved configuration and where each value came from."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from solver.cli.errors import reports_errors
from solver.config import describe, resolve_settings


@click.group("config")
def config() -> None:
    """Inspect the configuration; write agent settings for the proxy."""


@config.command("show")
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="solver.toml.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@reports_errors
def show(config_file: Path | None, as_json: bool) -> None:
    """Print every setting with its value and source (default, file, env:NAME, flag);
    secrets are masked."""
    resolved = resolve_settings(config_file=config_file)
    rows = describe(resolved)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "config_file": str(resolved.config_file) if resolved.config_file else None,
                    "settings": {
                        key: {"value": value, "source": source} for key, value, source in rows
                    },
                },
                sort_keys=True,
                default=str,
            )
        )
        return
    headers = ("key", "value", "source")
    table = Table(*headers)
    cells = [(key, str(value), source) for key, value, source in rows]
    for cell in cells:
        table.add_row(*cell)
    console = Console()
    if not console.is_terminal:
        # piped or redirected: rich would fit the table into 80 columns and cut the file names
        # off the sources; make the page as wide as the widest row instead
        widest = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(headers)]
        console = Console(width=sum(widest) + 4 * len(widest) + 1)
    console.print(table)
