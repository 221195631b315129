"""Regenerate an SGLang option table from SGLang's own argument parser.

Run it with a Python that has the pinned ``sglang`` installed (a CPU machine is enough: the
parser needs ``pip install --no-deps sglang==X`` plus torch and a dozen small packages, not a
GPU). It imports only the standard library and sglang, so it also runs outside this project::

    python serve/generate_option_table.py --out serve/options
    python serve/generate_option_table.py --tool sglang-router --out serve/options
    python serve/generate_option_table.py --tool smg --out serve/options

writes ``serve/options/sglang-<version>.json`` (every option string of
``ServerArgs.add_cli_args``), ``sglang-router-<version>.json`` (``RouterArgs.add_cli_args``
of ``python -m sglang_router.launch_router``) or ``smg-<version>.json`` (the same for smg, the
router's successor: ``python -m smg.launch_router``), each option with its dest, arity, choices
and value type. Both routers install in seconds (``pip install smg==X``); neither needs torch.
``serve/validate.py`` checks recipes against these tables;
``tests/serve/test_serve_sglang_parser.py`` diffs a fresh table against the committed one when
sglang is importable.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import sys
from pathlib import Path
from typing import Any

FORMAT_VERSION = 1


def _type_name(action: argparse.Action) -> str:
    if action.nargs == 0:
        return "flag"
    kind = action.type
    if kind in (int, float, str):
        return str(kind.__name__)
    if kind is None:
        return "str"
    # SGLang uses callables for sizes with suffixes (e.g. context length "1M") and for JSON.
    return getattr(kind, "__name__", type(kind).__name__)


def _describe(action: argparse.Action) -> dict[str, Any]:
    nargs = action.nargs
    return {
        "dest": action.dest,
        "nargs": nargs if isinstance(nargs, (int, str)) or nargs is None else str(nargs),
        "takes_value": nargs != 0,
        "type": _type_name(action),
        "choices": sorted(str(c) for c in action.choices) if action.choices else None,
        "default": None if action.default is None else repr(action.default)[:120],
        "hidden": action.help == argparse.SUPPRESS,
    }


def build_table(tool: str = "sglang") -> dict[str, Any]:
    if tool in ("sglang-router", "smg"):
        package = "sglang_router" if tool == "sglang-router" else "smg"
        # the distribution's version: smg 1.13.0's smg/version.py still says 1.1.0
        version = importlib.metadata.version(tool)
        router_args = importlib.import_module(f"{package}.router_args")
        parser = argparse.ArgumentParser(prog=f"{package}.launch_router", allow_abbrev=False)
        router_args.RouterArgs.add_cli_args(parser)
        source = "RouterArgs.add_cli_args"
    else:
        version = importlib.import_module("sglang").__version__
        server_args = importlib.import_module("sglang.srt.server_args")
        parser = argparse.ArgumentParser(prog="sglang serve", allow_abbrev=False)
        server_args.ServerArgs.add_cli_args(parser)
        source = "ServerArgs.add_cli_args"
    options: dict[str, Any] = {}
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        for option in action.option_strings:
            options[option] = _describe(action)
    return {
        "format_version": FORMAT_VERSION,
        "tool": tool,
        "version": str(version),
        "generated_by": f"serve/generate_option_table.py ({source})",
        "options": dict(sorted(options.items())),
    }


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    cli.add_argument("--tool", choices=["sglang", "sglang-router", "smg"], default="sglang")
    cli.add_argument("--out", type=Path, help="directory to write <tool>-<version>.json into")
    args = cli.parse_args(argv)
    table = build_table(args.tool)
    text = json.dumps(table, indent=1, sort_keys=False) + "\n"
    if args.out is None:
        sys.stdout.write(text)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / f"{table['tool']}-{table['version']}.json"
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target} ({len(table['options'])} option strings)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
