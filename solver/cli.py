"""The `solver` command line: a group of verbs, one module each under solver/commands/."""

from __future__ import annotations

import click

from solver import __version__
from solver.commands.audit import audit
from solver.commands.config import config
from solver.commands.eval import eval_group
from solver.commands.keys import keys
from solver.commands.local import group as local
from solver.commands.problem import problem
from solver.commands.proxy import config_agents
from solver.commands.proxy import group as proxy
from solver.commands.report import report
from solver.commands.run import resume, solve, status
from solver.commands.schema import schema
from solver.commands.serve import group as serve


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="solver")
def main() -> None:
    """Run a self-hosted model on olympiad problems, and prove afterwards what happened.

    Exit codes: 0 ok; 1 unexpected error; 2 bad input or configuration; 3 endpoint
    unavailable; 4 audit failed; 5 served model changed; 6 not found; 65 run corrupt;
    74 disk full; 75 run locked by another process; 130 interrupted (resumable).
    """


for command in (
    solve,
    resume,
    status,
    audit,
    report,
    eval_group,
    config,
    keys,
    schema,
    problem,
    local,
    serve,
    proxy,
):
    main.add_command(command)
# `solver config claude|codex` live beside the proxy that they point the agents at.
for name, command in config_agents.commands.items():
    config.add_command(command, name)


if __name__ == "__main__":
    main()
