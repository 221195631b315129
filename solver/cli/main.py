"""The `solver` command line: a group of verbs, one module each under solver/cli/.

Verb modules are imported when their verb runs, so `solver status` does not pay for the
proxy's web stack or the evaluator's plotting, and `solver --help` lists the verbs from
SUMMARIES without importing any of them."""

from __future__ import annotations

import importlib
import signal
import sys

import click

from solver import __version__
from solver._util.terminal import one_line
from solver.errors import EXIT_INTERRUPTED

# verb -> (module, attribute)
VERBS: dict[str, tuple[str, str]] = {
    "solve": ("solver.cli.run", "solve"),
    "resume": ("solver.cli.run", "resume"),
    "status": ("solver.cli.run", "status"),
    "audit": ("solver.cli.audit", "audit"),
    "report": ("solver.cli.report", "report"),
    "runs": ("solver.cli.runs", "runs"),
    "eval": ("solver.cli.eval", "eval_group"),
    "config": ("solver.cli.config", "config"),
    "keys": ("solver.cli.keys", "keys"),
    "schema": ("solver.cli.schema", "schema"),
    "problem": ("solver.cli.problem", "problem"),
    "local": ("solver.cli.local", "group"),
    "serve": ("solver.cli.serve", "group"),
    "proxy": ("solver.cli.proxy", "group"),
    "tool": ("solver.cli.tool", "tool"),
}

# verb -> the first sentence of its help, as `solver --help` lists it; a test holds each
# to the command's own docstring, so the two cannot drift apart
SUMMARIES: dict[str, str] = {
    "audit": "Verify the run directory RUN offline, read-only, without taking its lock.",
    "config": "Inspect the configuration; write agent settings for the proxy.",
    "eval": (
        "Score a whole problem set like a competition (`solver eval SET`), measure the"
        " graders against human grades (`solver eval calibrate FILE`), or write runs' proofs"
        " for humans to grade (`solver eval proofs RUN --out FILE`)."
    ),
    "keys": "Manage the signing keys of runs.",
    "local": "The embedded local model (SmolLM2-135M on llama.cpp, CPU only).",
    "problem": "Inspect problem files and problem sets.",
    "proxy": (
        "Bridge Anthropic Messages, OpenAI Responses and Chat Completions clients to any of"
        " those upstreams."
    ),
    "report": (
        "Summarise RUN: problem, outcome, selected proof, each candidate's lineage, every"
        " call, a timeline, tokens and time per role."
    ),
    "resume": "Continue RUN after a crash, kill, reboot or Ctrl-C.",
    "runs": "List the runs under a runs directory (newest first), or remove old ones.",
    "schema": "Print the JSON Schema of the journal's record types (loop and store).",
    "serve": "SGLang recipes checked before they run, a supervisor, a canary, a benchmark.",
    "solve": (
        "Solve PROBLEM (.md, .txt or .tex) with the six-role loop; prints the run directory"
        " first, live progress, then the outcome."
    ),
    "status": "Show whether RUN is running, interrupted, crashed or finished, with its totals.",
    "tool": "Run the roles' tools by hand: `solver tool run FILE.py` runs Python in the sandbox.",
}

# verbs that start or continue a run, where SIGTERM means "interrupt, keep it resumable"
RUN_VERBS = frozenset({"solve", "resume", "eval"})


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


class _Verbs(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(VERBS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in VERBS:
            return None
        if cmd_name in RUN_VERBS and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            # until the run's own handler is in place (after imports), SIGTERM is Ctrl-C:
            # exit 130 with one line, not 143, however early it comes
            signal.signal(signal.SIGTERM, _terminate)
        module, attribute = VERBS[cmd_name]
        command: object = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        if cmd_name == "config" and isinstance(command, click.Group):
            # `solver config claude|codex` live beside the proxy they point the agents at.
            agents = importlib.import_module("solver.cli.proxy").config_agents
            for name, sub in agents.commands.items():
                command.add_command(sub, name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing from SUMMARIES, each shortened by click as it shortens a docstring:
        importing every verb only to print its first sentence took a second."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [
            (name, click.Command(name, help=SUMMARIES[name]).get_short_help_str(limit))
            for name in names
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            # click quotes the bad value whole: a 5000-digit --seed is no one-line error
            shown = one_line(exc.format_message(), MAX_USAGE_CHARS)
            if shown == exc.format_message():
                raise
            raise click.UsageError(shown, exc.ctx) from None
        except KeyboardInterrupt:  # before the verb's own reporting took over (its imports)
            click.echo("interrupted; nothing was started", err=True)
            sys.exit(EXIT_INTERRUPTED)


MAX_USAGE_CHARS = 300


@click.group(cls=_Verbs, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="solver")
def main() -> None:
    """Run a self-hosted model on olympiad problems, and prove afterwards what happened.

    Exit codes: 0 ok; 1 unexpected error; 2 bad input or configuration; 3 endpoint
    unavailable; 4 audit failed; 5 served model changed; 6 not found; 65 run corrupt;
    74 disk full; 75 run locked by another process; 130 interrupted (resumable).
    """


if __name__ == "__main__":
    main()
