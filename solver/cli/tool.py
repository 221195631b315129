"""`solver tool run FILE.py`: run a Python file in the code sandbox with the configured limits,
as the roles' python tool runs the code a model writes.

Exit 0 when the sandbox ran the code, whatever the code's own exit (printed); 7 when the
sandbox could not start (bubblewrap missing, no user namespaces); 2 for a bad file."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import click

from solver._util.terminal import json_visible, visible
from solver.cli.errors import reports_errors
from solver.config import resolve_settings
from solver.errors import InputError
from solver.loop.tools import sandbox_limits
from solver.sandbox import run_python

# A program a model writes is a few kilobytes; a file much larger is no program to run here.
MAX_PROGRAM_BYTES = 1024 * 1024


@click.group("tool")
def tool() -> None:
    """Run the roles' tools by hand: `solver tool run FILE.py` runs Python in the sandbox."""


@tool.command("run")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="solver.toml.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@reports_errors
def run(path: Path, config_file: Path | None, as_json: bool) -> None:
    """Run the Python file PATH in the sandbox (no network, read-only system, private /tmp,
    the [sandbox] limits) and print its stdout, stderr, exit and why it was killed."""
    code = read_program(path)
    sandbox = resolve_settings(config_file=config_file).settings.sandbox
    result = run_python(
        code, sandbox_limits(sandbox), bwrap=sandbox.bwrap, python=sandbox.python, uid=sandbox.uid
    )
    record = result.as_json()
    if as_json:
        click.echo(json_visible(json.dumps(record, sort_keys=True, ensure_ascii=False)))
        return
    # the program's output is untrusted: its escape sequences are shown, never obeyed
    if record["stdout"]:
        click.echo(visible(record["stdout"]), nl=False)
    if record["stderr"]:
        click.echo(visible(record["stderr"]), nl=False, err=True)
    killed = f", killed: {record['killed_reason']}" if record["killed_reason"] else ""
    cpu = "?" if record["cpu_s"] is None else f"{record['cpu_s']:.2f}"
    click.echo(
        f"exit {record['exit']}{killed}; wall {record['wall_s']:.2f} s, cpu {cpu} s;"
        f" {record['sandbox']['bubblewrap']}, Python {record['sandbox']['python']}",
        err=True,
    )


def read_program(path: Path) -> str:
    """A program file's text: a regular file, at most MAX_PROGRAM_BYTES, UTF-8."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(f"{path}: not a regular file")
        with os.fdopen(os.dup(fd), "rb") as handle:
            raw = handle.read(MAX_PROGRAM_BYTES + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(raw) > MAX_PROGRAM_BYTES:
        raise InputError(f"{path}: over {MAX_PROGRAM_BYTES} bytes, no program to run here")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
