"""Check SGLang command lines before anything starts.

Two layers: every option against the pinned version's real option table (``serve/options``:
unknown, removed, renamed, abbreviated or ambiguous options, missing values, bad choices and
types), then the cross-flag rules SGLang only enforces at start-up on a GPU (``serve.rules``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable

from solver.serve import deployment_rules, minimums, rules
from solver.serve.findings import Finding, ParsedArgs, Severity, errors_of
from solver.serve.option_table import (
    OptionSpec,
    OptionTable,
    available_versions,
    load_table,
    version_key,
)
from solver.serve.recipe import Deployment, ProcessCommand

_Add = Callable[[Severity, str, str, str], None]

# Options SGLang removed or renamed, with the release that dropped them and the replacement.
# Source: parse tests of the real parsers of 0.5.1 ... 0.5.23 (docs/serve.md, "Flag history").
RENAMED: dict[str, tuple[str, str]] = {
    "--nsa-prefill-backend": ("0.5.20", "--dsa-prefill-backend"),
    "--nsa-decode-backend": ("0.5.20", "--dsa-decode-backend"),
    "--cuda-graph-max-bs": ("0.5.20", "--cuda-graph-max-bs-decode (and -prefill)"),
    "--enable-nsa-prefill-context-parallel": ("0.5.20", "--enable-prefill-cp --attn-cp-size N"),
    "--enable-dsa-prefill-context-parallel": ("0.5.20", "--enable-prefill-cp --attn-cp-size N"),
    "--nsa-prefill-cp-mode": ("0.5.20", "--cp-strategy"),
    "--dsa-prefill-cp-mode": ("0.5.20", "--cp-strategy"),
    "--enable-ep-moe": ("0.5.4", "--ep-size N"),
    # in the 0.5.19 table, gone by 0.5.23 (no table in between says exactly when)
    "--cuda-graph-bs": ("a release after 0.5.19", "--cuda-graph-bs-decode (and -prefill)"),
}


def check_options(
    args: list[str] | tuple[str, ...], table: OptionTable, process: str = ""
) -> tuple[ParsedArgs, list[Finding]]:
    """Walk ``args`` (everything after the launcher) the way argparse would."""
    findings: list[Finding] = []
    parsed = ParsedArgs()
    version = f"{table.tool} {table.version}"

    def add(severity: Severity, rule: str, option: str, message: str) -> None:
        findings.append(Finding(severity, rule, option, message, process))

    index = 0
    while index < len(args):
        token = args[index]
        index += 1
        if not token.startswith("-"):
            before = table.get(args[index - 2].partition("=")[0]) if index >= 2 else None
            if before is not None and not before.takes_value:
                # name the switch: `--set enable-metrics=5` renders as `--enable-metrics 5`
                add(
                    "error",
                    "unexpected-value",
                    before.option,
                    f"is a switch and takes no value, got {token!r} ({version}); "
                    "with --set write true or false",
                )
            else:
                add("error", "stray-value", token, f"value without an option ({version})")
            continue
        option, eq, inline = token.partition("=")
        spec = table.get(option)
        if spec is None:
            spec = _resolve_unknown(option, table, version, add)
            if spec is None:
                # skip the value that followed the unknown option, if any
                while index < len(args) and not args[index].startswith("--") and not eq:
                    index += 1
                continue
        values: list[str] = []
        if eq:
            values.append(inline)
        if spec.takes_value and not eq:
            if spec.nargs in ("+", "*") or (isinstance(spec.nargs, int) and spec.nargs > 1):
                while index < len(args) and not args[index].startswith("--"):
                    values.append(args[index])
                    index += 1
            elif index < len(args) and not _looks_like_option(args[index]):
                values.append(args[index])
                index += 1
        if spec.takes_value and not values and spec.nargs not in ("*", "?"):
            add("error", "missing-value", spec.option, f"expects a value ({version})")
            continue
        if not spec.takes_value and values:
            add(
                "error",
                "unexpected-value",
                spec.option,
                f"is a switch and takes no value ({version})",
            )
            continue
        for value in values:
            _check_value(spec.option, value, spec.value_type, spec.choices, version, add)
        value_out: str | list[str] | None
        if not spec.takes_value:
            value_out = None
        elif spec.nargs in ("+", "*") or isinstance(spec.nargs, int):
            value_out = values
        else:
            value_out = values[0] if values else None
        if spec.option in parsed.values:
            add("warning", "repeated", spec.option, "given twice; the last one wins")
        parsed.values[spec.option] = value_out
        parsed.dests[spec.dest] = value_out
    return parsed, findings


def _looks_like_option(token: str) -> bool:
    # argparse treats "-5" as a value when no option looks like a negative number
    return token.startswith("--") or (token.startswith("-") and not token[1:2].isdigit())


def _resolve_unknown(option: str, table: OptionTable, version: str, add: _Add) -> OptionSpec | None:
    """Explain an option the table does not have; return the spec argparse would use, if any."""
    matches = table.prefix_matches(option)
    renamed = RENAMED.get(option)
    if len(matches) > 1:
        shown = ", ".join(matches[:4]) + (" ..." if len(matches) > 4 else "")
        fix = f" (the option was removed in {renamed[0]}; use {renamed[1]})" if renamed else ""
        add(
            "error",
            "ambiguous-prefix",
            option,
            f"{version} rejects it as an ambiguous abbreviation of {shown}{fix}",
        )
        return None
    if renamed:
        add(
            "error",
            "removed-option",
            option,
            f"not accepted by {version} (removed in {renamed[0]}); use {renamed[1]}",
        )
        return None
    if len(matches) == 1:
        full = matches[0]
        add(
            "warning",
            "abbreviation",
            option,
            f"only parses as argparse's abbreviation of {full} ({version}); write {full}, "
            "since a later release can make the prefix ambiguous",
        )
        return table.get(full)
    newer = _first_version_with(option, table.tool, after=table.version)
    if newer:
        add(
            "error",
            "option-too-new",
            option,
            f"not in {version}; it first appears in the {newer} table: pin a newer version",
        )
        return None
    close = difflib.get_close_matches(option, list(table.options), n=1, cutoff=0.75)
    hint = f"; did you mean {close[0]}?" if close else ""
    older = _last_version_with(option, table.tool, before=table.version)
    if older:
        # the same destination under another spelling is the rename argparse would accept
        dest = load_table(older, table.tool).options[option].dest
        same = sorted(o for o, spec in table.options.items() if spec.dest == dest)
        if same:
            fix = f"use {same[0]}"
        else:
            fix = hint.removeprefix("; ") if hint else "drop it or pin the older version"
        add(
            "error",
            "removed-option",
            option,
            f"not in {version}: it is in the {older} table, gone by {table.version}; {fix}",
        )
        return None
    add("error", "unknown-option", option, f"not an option of {version}{hint}")
    return None


def _first_version_with(option: str, tool: str, after: str) -> str | None:
    for version in available_versions(tool):
        if version_key(version) > version_key(after) and load_table(version, tool).get(option):
            return version
    return None


def _last_version_with(option: str, tool: str, before: str) -> str | None:
    """The newest table older than ``before`` that still has ``option``: it was removed since."""
    found = None
    for version in available_versions(tool):
        if version_key(version) < version_key(before) and load_table(version, tool).get(option):
            found = version
    return found


def _check_value(
    option: str,
    value: str,
    kind: str,
    choices: tuple[str, ...] | None,
    version: str,
    add: _Add,
) -> None:
    if choices is not None and value not in choices:
        close = difflib.get_close_matches(value, list(choices), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        listed = f" ({', '.join(choices)})" if len(choices) <= 12 else ""
        add(
            "error",
            "bad-choice",
            option,
            f"{value!r} is not one of the {len(choices)} choices of {version}{listed}{hint}",
        )
        return
    if kind == "int" or kind == "float":
        try:
            int(value) if kind == "int" else float(value)
        except ValueError:
            add("error", "bad-type", option, f"{value!r} is not a valid {kind} ({version})")
    if kind == "human_readable_int" and not value.isdigit():
        add(
            "warning",
            "size-suffix",
            option,
            f"{value!r}: SGLang reads K/M/G as powers of ten and Ki/Mi/Gi as powers of two; "
            "write the exact integer",
        )


# ---------------------------------------------------------------- whole commands and recipes


def validate_args(
    args: list[str] | tuple[str, ...],
    version: str,
    *,
    tool: str = "sglang",
    model: str = "",
    process: str = "",
) -> list[Finding]:
    """Validate one command line (without the launcher) against ``tool`` at ``version``."""
    table = load_table(version, tool)
    parsed, findings = check_options(args, table, process)
    if tool == "sglang":
        # without an explicit model, the command line's own --model-path drives the model rules
        model = model or parsed.text("model_path")
        findings += rules.server_rules(parsed, model=model, version=version, process=process)
    else:
        findings += rules.router_rules(parsed, process=process)
    return findings


def validate_process(command: ProcessCommand, deployment: Deployment) -> list[Finding]:
    recipe = deployment.recipe
    args = command.argv[command.launcher_len :]
    if command.role == "router":
        if recipe.router_version is None:
            return [
                Finding(
                    "error",
                    "router-version",
                    "router",
                    "recipe has a router but no router_version to check it against",
                    command.label,
                )
            ]
        return validate_args(args, recipe.router_version, tool=recipe.router, process=command.label)
    return validate_args(args, recipe.sglang_version, model=recipe.model, process=command.label)


def validate_deployment(deployment: Deployment) -> list[Finding]:
    findings: list[Finding] = []
    for command in deployment.processes:
        findings += validate_process(command, deployment)
    findings += deployment_rules.deployment_rules(deployment)
    findings += minimums.floor_findings(deployment)
    return findings


__all__ = ["Finding", "ParsedArgs", "Severity", "errors_of", "validate_args", "validate_deployment"]
