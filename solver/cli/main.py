"""The `solver` command line: a group of verbs, one module each under solver/cli/.

Verb modules are imported when their verb runs (or when help lists them), so `solver status`
does not pay for the proxy's web stack or the evaluator's plotting."""

from __future__ import annotations

import importlib

import click

from solver import __version__

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


class _Verbs(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(VERBS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in VERBS:
            return None
        module, attribute = VERBS[cmd_name]
        command: object = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        if cmd_name == "config" and isinstance(command, click.Group):
            # `solver config claude|codex` live beside the proxy they point the agents at.
            agents = importlib.import_module("solver.cli.proxy").config_agents
            for name, sub in agents.commands.items():
                command.add_command(sub, name)
        return command


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
