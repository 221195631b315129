"""The recipes against SGLang's real parser, and the committed option tables against a fresh
dump. Needs sglang: importable here, or a Python that has it named by SOLVER_SGLANG_PYTHON
(e.g. a throwaway venv with `pip install --no-deps sglang==X` plus torch). Skipped otherwise."""

from __future__ import annotations

import importlib.util
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

# Runs inside the sglang interpreter: stdlib and sglang only.
PARSE_SCRIPT = r"""
import argparse, contextlib, io, json, sys
import sglang
from sglang.srt.server_args import ServerArgs
jobs = json.load(sys.stdin)
out = {"version": sglang.__version__, "results": []}
for args in jobs:
    row = {}
    for abbrev in (True, False):
        parser = argparse.ArgumentParser(prog="sglang serve", allow_abbrev=abbrev)
        ServerArgs.add_cli_args(parser)
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                parser.parse_args(args)
            row["abbrev" if abbrev else "strict"] = "ok"
        except SystemExit:
            row["abbrev" if abbrev else "strict"] = err.getvalue().strip().splitlines()[-1]
    out["results"].append(row)
print(json.dumps(out))
"""


def _sglang_python() -> str | None:
    configured = os.environ.get("SOLVER_SGLANG_PYTHON")
    if configured:
        return configured
    return sys.executable if importlib.util.find_spec("sglang") else None


PYTHON = _sglang_python()
if PYTHON is None:
    pytest.skip("sglang is not installed (set SOLVER_SGLANG_PYTHON)", allow_module_level=True)


def _run(script: str, stdin: str, *args: str) -> str:
    done = subprocess.run(
        [str(PYTHON), "-c", script, *args], input=stdin, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _installed_version() -> str:
    return _run("import sglang; print(sglang.__version__)", "").strip()


def test_committed_table_matches_a_fresh_dump(tmp_path: Path) -> None:
    version = _installed_version()
    generator = ROOT / "solver" / "serve" / "generate_option_table.py"
    _run(generator.read_text(), "", "--out", str(tmp_path))
    fresh = json.loads((tmp_path / f"sglang-{version}.json").read_text())
    committed = load_table(version)
    assert set(fresh["options"]) == set(committed.options)
    for option, spec in fresh["options"].items():
        assert spec["dest"] == committed.options[option].dest
        assert spec["takes_value"] == committed.options[option].takes_value
        assert tuple(spec["choices"] or ()) == (committed.options[option].choices or ())


def test_every_recipe_for_the_installed_version_parses_with_the_real_parser() -> None:
    version = _installed_version()
    jobs, names = [], []
    for recipe in all_recipes():
        if recipe.sglang_version != version:
            continue
        for process in render(recipe).processes:
            if process.role != "router":
                jobs.append(list(process.argv[process.launcher_len :]))
                names.append(f"{recipe.name}/{process.label}")
    if not jobs:
        pytest.skip(f"no recipe pins the installed sglang {version}")
    bad = ["--cuda-graph-max-bs", "128"]
    out = json.loads(_run(PARSE_SCRIPT, json.dumps([*jobs, bad])))
    *rows, bad_row = out["results"]
    for name, row in zip(names, rows, strict=True):
        # no reliance on argparse prefix abbreviations either
        assert row == {"abbrev": "ok", "strict": "ok"}, (name, row)
    if version == "0.5.23":
        assert "ambiguous option: --cuda-graph-max-bs" in bad_row["abbrev"]
