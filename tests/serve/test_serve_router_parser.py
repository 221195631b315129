"""The router lines of the recipes against the router's real parser, and the committed router
tables against a fresh dump. Needs the router a recipe pins (smg or sglang-router): importable
here, or a Python that has it named by SOLVER_ROUTER_PYTHON (`pip install smg==X` takes seconds
and no torch). Skipped otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from solver.serve.option_table import load_table
from solver.serve.recipe import all_recipes, render

pytestmark = pytest.mark.sglang

ROOT = Path(__file__).resolve().parents[2]
PYTHON = os.environ.get("SOLVER_ROUTER_PYTHON") or sys.executable

# Runs inside the router's interpreter: stdlib and the router package only.
PARSE_SCRIPT = r"""
import argparse, contextlib, importlib, importlib.metadata, io, json, sys
tool = sys.argv[1]
package = "smg" if tool == "smg" else "sglang_router"
router_args = importlib.import_module(package + ".router_args")
jobs = json.load(sys.stdin)
out = {"version": importlib.metadata.version(tool), "results": []}
for args in jobs:
    parser = argparse.ArgumentParser(prog=package + ".launch_router", allow_abbrev=False)
    router_args.RouterArgs.add_cli_args(parser)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser.parse_args(args)
        out["results"].append("ok")
    except SystemExit:
        out["results"].append(err.getvalue().strip().splitlines()[-1])
print(json.dumps(out))
"""


def _installed(tool: str) -> str | None:
    done = subprocess.run(
        [PYTHON, "-c", f"import importlib.metadata as m; print(m.version({tool!r}))"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return done.stdout.strip() if done.returncode == 0 else None


def _tool() -> tuple[str, str]:
    for tool in ("smg", "sglang-router"):
        version = _installed(tool)
        if version is not None:
            return tool, version
    pytest.skip("no router installed (set SOLVER_ROUTER_PYTHON)")


def test_committed_router_table_matches_a_fresh_dump(tmp_path: Path) -> None:
    tool, version = _tool()
    generator = ROOT / "solver" / "serve" / "generate_option_table.py"
    done = subprocess.run(
        [PYTHON, str(generator), "--tool", tool, "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    fresh = json.loads((tmp_path / f"{tool}-{version}.json").read_text())
    committed = load_table(version, tool)
    assert set(fresh["options"]) == set(committed.options)
    for option, spec in fresh["options"].items():
        assert spec["dest"] == committed.options[option].dest
        assert tuple(spec["choices"] or ()) == (committed.options[option].choices or ())


def test_every_router_line_parses_with_the_real_router_parser() -> None:
    tool, version = _tool()
    jobs, names = [], []
    for recipe in all_recipes():
        for process in render(recipe).processes:
            if process.role == "router" and (recipe.router, recipe.router_version) == (
                tool,
                version,
            ):
                jobs.append(list(process.argv[process.launcher_len :]))
                names.append(recipe.name)
    if not jobs:
        pytest.skip(f"no recipe pins the installed {tool} {version}")
    bad = ["--worker-urlz", "http://127.0.0.1:1"]
    done = subprocess.run(
        [PYTHON, "-c", PARSE_SCRIPT, tool], input=json.dumps([*jobs, bad]),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    *rows, bad_row = json.loads(done.stdout)["results"]
    assert rows == ["ok"] * len(names), list(zip(names, rows, strict=True))
    assert "unrecognized arguments: --worker-urlz" in bad_row
