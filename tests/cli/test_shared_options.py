"""`solve` and `eval` share one definition of their common options (solver.cli.options)."""

from __future__ import annotations

import click
from click.testing import CliRunner

from solver.cli.eval import eval_group
from solver.cli.run import solve

# The flags each command had before the shared definition: none may go missing.
SOLVE = {
    "--accept", "--api", "--blind", "--candidates", "--concurrency", "--config", "--endpoint",
    "--json", "--max-calls", "--max-tokens", "--max-wall", "--model", "--run-dir", "--runs-dir",
    "--seed", "--verifications",
}  # fmt: skip
EVAL_RUN = {
    "--accept", "--aggregation", "--api", "--candidates", "--concurrency",
    "--concurrency-problems", "--config", "--endpoint", "--graders", "--json", "--map",
    "--max-calls", "--max-tokens", "--max-wall", "--model", "--out", "--progress-every",
    "--reconcile", "--runs", "--scale", "--shard", "--verifications",
}  # fmt: skip
EVAL_CALIBRATE = {
    "--aggregation", "--api", "--comparisons", "--concurrency", "--concurrency-problems",
    "--config", "--endpoint", "--graders", "--json", "--model", "--no-comparisons", "--out",
    "--progress-every", "--reconcile", "--scale", "--verifications",
}  # fmt: skip
SHARED = {
    "--accept", "--api", "--candidates", "--concurrency", "--config", "--endpoint", "--json",
    "--max-calls", "--max-tokens", "--max-wall", "--model", "--verifications",
}  # fmt: skip


def _options(command: click.Command) -> dict[str, click.Option]:
    ctx = click.Context(command)
    return {
        flag: p
        for p in command.get_params(ctx)
        if isinstance(p, click.Option)
        for flag in (*p.opts, *p.secondary_opts)
        if "--help" not in p.opts
    }


def _sub(name: str) -> click.Command:
    found = eval_group.get_command(click.Context(eval_group), name)
    assert found is not None
    return found


def test_every_flag_is_kept() -> None:
    assert set(_options(solve)) == SOLVE
    assert set(_options(_sub("run"))) == EVAL_RUN
    assert set(_options(_sub("calibrate"))) == EVAL_CALIBRATE


def test_shared_flags_are_one_definition() -> None:
    """The same parameter name, type and default in `solve` and `eval run`."""
    solve_opts, run_opts = _options(solve), _options(_sub("run"))
    for flag in SHARED:
        mine, theirs = solve_opts[flag], run_opts[flag]
        assert (mine.name, type(mine.type), mine.default, mine.is_flag) == (
            theirs.name,
            type(theirs.type),
            theirs.default,
            theirs.is_flag,
        ), flag


def test_help_lists_the_shared_flags() -> None:
    runner = CliRunner()
    for args, command in ((["--help"], solve), (["run", "--help"], eval_group)):
        shown = runner.invoke(command, args)
        assert shown.exit_code == 0, shown.output
        for flag in SHARED:
            assert flag in shown.output, (args, flag)
