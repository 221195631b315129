"""The `solver` command line: a group of verbs, one module each under solver/cli/.

Verb modules are imported when their verb runs (or when help lists them), so `solver status`
does not pay for the proxy's web stack or the evaluator's plotting."""

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
    "eval": ("solver.cli.eval", "eval_group"),
    "config": ("solver.cli.config", "config"),
    "keys": ("solver.cli.keys", "keys"),
    "schema": ("solver.cli.schema", "schema"),
    "problem": ("solver.cli.problem", "problem"),
    "local": ("solver.cli.local", "group"),
    "serve": ("solver.cli.serve", "group"),
    "proxy": ("solver.cli.proxy", "group"),
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
