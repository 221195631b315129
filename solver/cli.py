"""The `solver` command line: a group of verbs."""

from __future__ import annotations

import click

from solver import __version__


@click.group()
@click.version_option(__version__, prog_name="solver")
def main() -> None:
    """Run a self-hosted model on olympiad problems, and prove afterwards what happened."""
