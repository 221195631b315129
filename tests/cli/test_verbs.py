"""Every verb answers --help; --version works; bad input is one line and exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from solver import __version__
from solver.cli.main import SUMMARIES, VERBS, main


def all_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [prefix]
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            found.extend(all_commands(command, (*prefix, name)))
        else:
            found.append((*prefix, name))
    return found


@pytest.mark.parametrize("path", all_commands(main), ids=lambda p: " ".join(p) or "solver")
def test_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


@pytest.mark.parametrize("width", [40, 80, 200])
def test_the_verb_listing_is_what_click_prints_from_the_commands_themselves(width: int) -> None:
    """SUMMARIES stands in for each verb's docstring in `solver --help`: the listing must be
    the one click would print after importing every verb, at any terminal width."""
    assert set(SUMMARIES) == set(VERBS)
    ctx = click.Context(main, terminal_width=width, max_content_width=width)
    lazy, eager = ctx.make_formatter(), ctx.make_formatter()
    main.format_commands(ctx, lazy)
    click.Group.format_commands(main, ctx, eager)  # imports every verb
    assert lazy.getvalue() == eager.getvalue()
    assert "audit" in lazy.getvalue() and "Commands:" in lazy.getvalue()


def test_help_imports_no_verb() -> None:
    probe = (
        "import sys\n"
        "from solver.cli.main import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "verbs = [m for m in sys.modules if m.startswith('solver.cli.')]\n"
        "print(sorted(set(verbs) - {'solver.cli.main'}))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert "Commands:" in done.stdout and "resume" in done.stdout
    assert done.stdout.splitlines()[-1] == "[]", done.stdout.splitlines()[-1]


def test_version_from_a_real_process() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "solver", "--version"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0
    assert __version__ in done.stdout


def test_solve_without_an_endpoint_says_so_in_one_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = tmp_path / "p.md"
    problem.write_text("Prove that 1 + 1 = 2.\n")
    monkeypatch.chdir(tmp_path)
    for name in ("SOLVER_ENDPOINT", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SOLVER_ENDPOINT_FILE", str(tmp_path / "none.json"))
    result = CliRunner().invoke(main, ["solve", str(problem)])
    assert result.exit_code == 2
    assert "no model endpoint is configured" in result.output
    assert "SOLVER_ENDPOINT" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["solve", "missing.md"], 2),
        (["status", "no-such-run"], 6),
        (["resume", "no-such-run"], 6),
        (["audit", "no-such-run"], 6),
    ],
)
def test_bad_arguments_exit_codes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], code: int
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == code, result.output
    assert result.output.count("\n") <= 2 and "Traceback" not in result.output


def test_schema_lists_every_record_type() -> None:
    import json

    result = CliRunner().invoke(main, ["schema"])
    assert result.exit_code == 0
    document = json.loads(result.output)
    text = json.dumps(document["loop_records"])
    for name in ("call.planned", "context.built", "llm.started", "run.finished"):
        assert name in text
    assert document["store_records"]
