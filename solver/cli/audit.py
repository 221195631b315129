"""`solver audit RUN [--json] [--key PUBLIC_KEY]`: verify a run directory offline.

Exit codes: 0 when no check fails, 4 when one does, 6 when the run directory or the key file
does not exist, 2 when the key file is not an Ed25519 public key.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from solver._util.terminal import json_visible, visible
from solver.audit import AuditReport, audit_run, statuses
from solver.cli.errors import reports_errors
from solver.errors import AuditFailed, InputError, NotFound
from solver.store import StoreError, UnsafeEntry

__all__ = ["audit"]

_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red"}


def _print_table(report: AuditReport) -> None:
    table = Table(title=f"audit of {report.run}")
    table.add_column("check")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    table.add_column("where", overflow="fold")
    for row in report.checks:
        # details quote the run's content, which may be hostile: no markup, no escapes
        table.add_row(
            row.name,
            f"[{_STYLE[row.status]}]{row.status}[/]",
            Text(visible(row.detail)),
            Text(visible(row.where or "")),
        )
    console = Console()
    console.print(table)
    counts = statuses(report.checks)
    verdict = "[green]OK[/]" if report.ok else "[bold red]FAILED[/]"
    console.print(f"{verdict}: {counts['pass']} pass, {counts['warn']} warn, {counts['fail']} fail")


@click.command("audit")
@click.argument("run", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help='Print {"ok": ..., "checks": [...]}.')
@click.option(
    "--key",
    "public_key",
    type=click.Path(path_type=Path),
    help="Ed25519 public key (PEM) that seals and the attestation must verify with. Without "
    "it they are checked with the key the run carries, which shows consistency only.",
)
@reports_errors
def audit(run: Path, as_json: bool, public_key: Path | None) -> None:
    """Verify the run directory RUN offline, read-only, without taking its lock."""
    if not run.is_dir():
        raise NotFound(f"{run}: no such run directory")
    if public_key is not None and not public_key.is_file():
        raise NotFound(f"{public_key}: no such key file")
    try:
        report = audit_run(run, public_key=public_key)
    except UnsafeEntry:
        raise  # a symlink or special file in the run is damage: exit 65
    except StoreError as exc:  # not a run, or the key file is not an Ed25519 public key
        raise InputError(str(exc)) from None
    if as_json:
        shown = json.dumps(
            {"ok": report.ok, "checks": report.model_dump()["checks"]},
            ensure_ascii=False,
            indent=2,
        )
        click.echo(json_visible(shown))
    else:
        _print_table(report)
    if not report.ok:
        failed = statuses(report.checks)["fail"]
        raise AuditFailed(f"{report.run}: {failed} failing check{'s' if failed != 1 else ''}")
