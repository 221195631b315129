"""``solver serve recipes|command|validate|up|supervise|check|bench``: SGLang for GLM.

Exit codes: 0 ok; 1 a check or benchmark failed; 2 bad option, recipe override or a recipe
that fails validation; 3 the endpoint could not be reached or the server kept failing;
6 unknown recipe; 130 stopped with Ctrl-C (the server tree is stopped too).
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import click

from solver.cli.errors import reports_errors
from solver.errors import EXIT_INTERRUPTED


@click.group("serve")
def group() -> None:
    """SGLang recipes checked before they run, a supervisor, a canary, a benchmark."""


@group.command("recipes")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@reports_errors
def recipes_command(as_json: bool) -> None:
    """List the deployment recipes."""
    from solver.serve import all_recipes

    recipes = all_recipes()
    if as_json:
        rows = [
            {
                "name": r.name,
                "title": r.title,
                "model": r.model,
                "hardware": r.hardware,
                "sglang_version": r.sglang_version,
                "image": r.image,
                "processes": [p.label for p in r.processes],
            }
            for r in recipes
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    width = max(len(r.name) for r in recipes)
    for r in recipes:
        click.echo(f"{r.name:<{width}}  sglang {r.sglang_version:<7} {r.title}")


@group.command("command")
@click.argument("recipe")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a flag "
              "(tp-size=4, enable-prefill-cp=false, decode.mem-fraction-static=0.9) or a recipe "
              "variable (prefill_host=ADDR).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--pip", "pip_only", is_flag=True, help="Print only the pip requirements of the "
              "pinned versions, one a line, for: solver serve command RECIPE --pip | "
              "xargs pip install.")  # fmt: skip
@reports_errors
def command_command(recipe: str, overrides: tuple[str, ...], as_json: bool, pip_only: bool) -> None:
    """Print the exact argv, environment and container command of RECIPE, after validation."""
    from solver.errors import ConfigError
    from solver.serve import (
        errors_of,
        load_recipe,
        minimums,
        pip_requirements,
        render,
        validate_deployment,
    )

    deployment = render(load_recipe(recipe), list(overrides))
    findings = validate_deployment(deployment)
    errors = errors_of(findings)
    if errors:
        # nothing on stdout: a piped `--pip | xargs pip install` or a pasted argv must not
        # go ahead with a command that fails validation
        for finding in findings:
            click.echo(finding.line(), err=True)
        raise ConfigError(f"recipe {recipe}: {len(errors)} validation error(s)")
    requirements = pip_requirements(deployment)
    if pip_only:
        # one requirement a line, for `| xargs pip install` (no shell globbing of [all])
        click.echo("\n".join(requirements))
    elif as_json:
        floor = minimums.minimum_sglang(deployment)
        payload: dict[str, Any] = {
            "recipe": recipe,
            "sglang_version": deployment.recipe.sglang_version,
            "image": deployment.recipe.image,
            # what an image must carry on gfx950 (the Block-FP8 fixes); None elsewhere
            "gfx950_image_floor": minimums.gfx950_floor(deployment),
            "min_sglang_version": floor.version,
            "min_sglang_needs": list(floor.needs),
            "pip": requirements,
            "findings": [f.line() for f in findings],
            "processes": [
                {
                    "label": p.label,
                    "role": p.role,
                    "url": p.url,
                    "argv": list(p.argv),
                    "env": p.env,
                    "container": list(p.container_argv),
                }
                for p in deployment.processes
            ],
        }
        click.echo(json.dumps(payload, indent=2))
    else:
        r = deployment.recipe
        click.echo(f"# {r.name}: {r.title}")
        click.echo(f"# hardware: {r.hardware}")
        click.echo(f"# SGLang {r.sglang_version}, image {r.image}")
        for line in minimums.describe(deployment):
            click.echo(f"# {line}")
        click.echo(f"# install: pip install {_shell(tuple(requirements))}")
        for p in deployment.processes:
            click.echo(f"\n## process {p.label} ({p.role}), serves {p.url}")
            click.echo("environment:")
            for key, value in p.env.items():
                click.echo(f"  {key}={value}")
            click.echo("argv:")
            click.echo("  " + _shell(p.argv))
            click.echo("container:")
            click.echo("  " + _shell(p.container_argv))
    if not as_json:  # warnings only, by now; --json carries them in "findings"
        for finding in findings:
            click.echo(finding.line(), err=True)


def _shell(argv: tuple[str, ...]) -> str:
    import shlex

    return shlex.join(argv)


def _stop_on_signals(supervisor: Any) -> None:
    def handler(signum: int, frame: object) -> None:
        supervisor.stop()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def _policy(startup_timeout: float, liveness_interval: float) -> Any:
    from solver.serve import Policy

    return Policy(startup_timeout=startup_timeout, liveness_interval=liveness_interval)


def _finish(supervisor: Any) -> None:
    click.echo(f"serve: stopped after {supervisor.restarts} restart(s)", err=True)
    sys.exit(EXIT_INTERRUPTED)


_supervise_options = [
    click.option("--startup-timeout", type=float, default=1800.0, show_default=True,
                 help="Seconds to wait for readiness after each start."),
    click.option("--liveness-interval", type=float, default=15.0, show_default=True,
                 help="Seconds between liveness probes."),
]  # fmt: skip


def _with_supervise_options(func: Any) -> Any:
    for option in reversed(_supervise_options):
        func = option(func)
    return func


@group.command("up")
@click.argument("recipe")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="As for `command`.")
@click.option("--process", "process_label", default=None, help="Which process of a "
              "multi-process recipe runs here (prefill, decode, router, node0, ...).")  # fmt: skip
@click.option("--container", is_flag=True, help="Run the pinned image with docker instead of "
              "the argv directly.")  # fmt: skip
@click.option("--api-key-env", default=None, metavar="NAME", help="Environment variable "
              "holding the server's API key (never written to logs).")  # fmt: skip
@click.option("--allow-version-mismatch", is_flag=True, help="Start even when the installed "
              "SGLang is not the version the recipe pins.")  # fmt: skip
@_with_supervise_options
@reports_errors
def up_command(
    recipe: str,
    overrides: tuple[str, ...],
    process_label: str | None,
    container: bool,
    api_key_env: str | None,
    allow_version_mismatch: bool,
    startup_timeout: float,
    liveness_interval: float,
) -> None:
    """Start RECIPE under supervision; Ctrl-C stops the whole process tree."""
    from solver.serve import load_recipe, pick_process, plan_recipe, render, run_plan

    deployment = render(load_recipe(recipe), list(overrides))
    process = pick_process(deployment, process_label)
    plan = plan_recipe(
        deployment,
        process,
        container=container,
        api_key_env=api_key_env,
        check_version=not allow_version_mismatch,
    )
    supervisor = run_plan(
        plan,
        source=f"serve:{recipe}",
        policy=_policy(startup_timeout, liveness_interval),
        echo=lambda line: click.echo(line, err=True),
        install_stop=_stop_on_signals,
    )
    _finish(supervisor)


@group.command("supervise", context_settings={"ignore_unknown_options": True})
@click.option(
    "--url", required=True, help="Base URL the command serves, e.g. http://127.0.0.1:8000"
)
@click.option(
    "--name", default="custom", show_default=True, help="Name for logs and the descriptor."
)
@click.option("--router", is_flag=True, help="The command is a router (smg, sglang-router): "
              "ready on /readiness, alive on /liveness, no deep probe.")  # fmt: skip
@_with_supervise_options
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
@reports_errors
def supervise_command(
    url: str,
    name: str,
    router: bool,
    startup_timeout: float,
    liveness_interval: float,
    argv: tuple[str, ...],
) -> None:
    """Supervise any server command (vLLM, a custom build).

    solver serve supervise --url http://127.0.0.1:8000 -- vllm serve MODEL ...
    """
    from solver.serve import plan_command, run_plan

    plan = plan_command(list(argv), url, name, kind="router" if router else "server")
    supervisor = run_plan(
        plan,
        source=f"serve:{name}",
        policy=_policy(startup_timeout, liveness_interval),
        echo=lambda line: click.echo(line, err=True),
        install_stop=_stop_on_signals,
    )
    _finish(supervisor)


def _json_out(payload: Any, path: Path | None) -> None:
    text = json.dumps(payload, indent=2, default=str)
    if path is None:
        click.echo(text)
    else:
        path.write_text(text + "\n", encoding="utf-8")


def _endpoint_or_descriptor(endpoint: str | None) -> str:
    from solver.endpoint_file import read_descriptor
    from solver.errors import InputError

    if endpoint:
        return endpoint
    desc = read_descriptor()
    if desc is None:
        raise InputError("no --endpoint given and no running server recorded (solver serve up)")
    # the canary and the sweep are sized for a served GLM (32k-token answers, 1800 s requests);
    # the embedded model from `solver local up` would only stall them, so it is never a default
    if not desc.source.startswith("serve:"):
        what = "the embedded local model" if desc.source == "local" else repr(desc.source)
        raise InputError(f"the running endpoint is {what}; pass --endpoint URL")
    return desc.base_url


def _api_key(name: str | None) -> str | None:
    import os

    from solver.errors import InputError

    if name is None:
        return None
    value = os.environ.get(name)
    if not value:
        raise InputError(f"--api-key-env {name}: that environment variable is empty")
    return value


def _int_list(text: str, option: str) -> tuple[int, ...]:
    from solver.errors import InputError

    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise InputError(f"{option} {text!r}: expected comma-separated integers") from None
    if not values or any(v < 1 for v in values):
        raise InputError(f"{option} {text!r}: expected positive integers")
    return values


@group.command("check")
@click.option("--endpoint", default=None, help="Base URL (default: the running `serve up`).")
@click.option("--baseline", type=click.Path(path_type=Path), default=None,
              help="A saved report to compare with: only regressions fail the check, "
              "failures the baseline also had are noted.")  # fmt: skip
@click.option("--save-baseline", type=click.Path(path_type=Path), default=None,
              help="Write this run's report as a baseline.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--repeats", type=click.IntRange(2, 50), default=3, show_default=True)
@click.option("--batch-sizes", default="4,8", show_default=True)
@click.option("--chain-steps", type=click.IntRange(10, 5000), default=300, show_default=True)
@click.option("--concurrency", type=click.IntRange(1, 512), default=48, show_default=True,
              help="Checked chains sent at once: the production concurrency, so speculative "
              "verify batches are as large as in production.")  # fmt: skip
@click.option("--min-accept-length", type=click.FloatRange(1.0), default=2.0, show_default=True,
              help="Speculative accept length below which the check fails (healthy GLM MTP "
              "measured 2.65-3.77, the gfx950 precision bug about 1.3).")  # fmt: skip
@click.option("--worker", "workers", multiple=True, metavar="URL", help="Behind a router: a "
              "worker's base URL to read server facts and /metrics from (repeat; default: "
              "the router's /workers).")  # fmt: skip
@click.option("--max-tokens", type=click.IntRange(16), default=32768, show_default=True)
@click.option("--context-length", type=click.IntRange(512), default=None,
              help="Override the served context length the recall probes scale to.")  # fmt: skip
@click.option("--model", default=None, help="Model name (default: the first of /v1/models).")
@click.option("--api-key-env", default=None, metavar="NAME")
@click.option("--timeout", type=float, default=1800.0, show_default=True,
              help="Seconds allowed per request.")  # fmt: skip
@reports_errors
def check_command(
    endpoint: str | None,
    baseline: Path | None,
    save_baseline: Path | None,
    as_json: bool,
    repeats: int,
    batch_sizes: str,
    chain_steps: int,
    concurrency: int,
    min_accept_length: float,
    workers: tuple[str, ...],
    max_tokens: int,
    context_length: int | None,
    model: str | None,
    api_key_env: str | None,
    timeout: float,
) -> None:
    """Canary probes for numerics that pass short prompts and fail long reasoning."""
    from solver.serve import CanaryOptions, canary, run_canary

    old = canary.load_baseline(baseline) if baseline is not None else None
    options = CanaryOptions(
        repeats=repeats,
        batch_sizes=_int_list(batch_sizes, "--batch-sizes"),
        chain_steps=chain_steps,
        concurrency=concurrency,
        min_accept_length=min_accept_length,
        workers=tuple(w.rstrip("/") for w in workers),
        max_tokens=max_tokens,
        context_length=context_length,
        model=model,
        api_key=_api_key(api_key_env),
        timeout=timeout,
        progress=lambda line: click.echo(f"check: {line}", err=True),
    )
    report = run_canary(_endpoint_or_descriptor(endpoint), options)
    if old is not None and baseline is not None:
        canary.apply_baseline(report, old, str(baseline))
    if save_baseline is not None:
        _json_out(report.as_json(), save_baseline)
    if as_json:
        _json_out(report.as_json(), None)
    else:
        click.echo(canary.render_table(report))
    if not report.passed:
        sys.exit(1)


@group.command("bench")
@click.option("--endpoint", "endpoints", multiple=True, help="Base URL; repeat to compare "
              "(default: the running `serve up`).")  # fmt: skip
@click.option("--concurrency", default="1,2,4,8,16,24,32,48", show_default=True)
@click.option("--duration", type=float, default=900.0, show_default=True,
              help="Seconds of sending per level and endpoint.")  # fmt: skip
@click.option("--grace", type=float, default=60.0, show_default=True,
              help="Seconds in-flight requests get to finish after each level.")  # fmt: skip
@click.option("--dataset", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="JSONL of chat bodies (messages, max_tokens, tools) or {prompt}.")  # fmt: skip
@click.option(
    "--same-prompts",
    is_flag=True,
    help="Send data set items unchanged (by default "
    "each request gets a distinct first line, so repeats do not hit the radix cache).",
)
@click.option("--flush-cache", is_flag=True, help="POST /flush_cache (SGLang) before each level.")
@click.option(
    "--ignore-eos",
    is_flag=True,
    help="Decode every request to its max_tokens "
    "(SGLang's ignore_eos): measures late decode, not just the first tokens.",
)
@click.option("--max-tokens", type=click.IntRange(1), default=1024, show_default=True,
              help="For dataset lines without max_tokens.")  # fmt: skip
@click.option(
    "--thinking-budget",
    type=click.IntRange(1),
    default=None,
    metavar="N",
    help="Also run each endpoint with this thinking budget in every request (SGLang's "
    "processor, as solve sends it), side by side: what the budget costs the server's decode.",
)
@click.option("--model", default=None, help="Model name (default: the first of /v1/models).")
@click.option("--api-key-env", default=None, metavar="NAME")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Write the JSON summary here.")  # fmt: skip
@click.option("--plot", "plot_path", type=click.Path(path_type=Path), default=None,
              help="Write a PNG of total tok/s against P90 per-user tok/s.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the JSON summary.")
@reports_errors
def bench_command(
    endpoints: tuple[str, ...],
    concurrency: str,
    duration: float,
    grace: float,
    dataset: Path | None,
    max_tokens: int,
    model: str | None,
    api_key_env: str | None,
    out: Path | None,
    plot_path: Path | None,
    as_json: bool,
    same_prompts: bool,
    flush_cache: bool,
    ignore_eos: bool,
    thinking_budget: int | None,
) -> None:
    """Concurrency sweep: total output tok/s, P90 per-user tok/s, TTFT, errors."""
    from solver.serve import BenchOptions, bench, load_dataset, run_bench, summary_json

    options = BenchOptions(
        concurrency=_int_list(concurrency, "--concurrency"),
        duration=duration,
        grace=grace,
        max_tokens=max_tokens,
        api_key=_api_key(api_key_env),
        model=model,
        distinct_prompts=not same_prompts,
        flush_cache=flush_cache,
        ignore_eos=ignore_eos,
        thinking_budget=thinking_budget,
    )
    items = load_dataset(dataset, max_tokens)
    urls = list(endpoints) or [_endpoint_or_descriptor(None)]

    def progress(level: Any) -> None:
        click.echo(
            f"bench: {level.endpoint} c{level.concurrency}: "
            f"{level.total_output_tok_s:.1f} tok/s, {level.completed} done, {level.failed} failed",
            err=True,
        )

    def starting(endpoint: str, concurrency: int) -> None:
        # a level runs --duration seconds before it reports: say when it begins
        click.echo(f"bench: {endpoint} c{concurrency}: started, {duration:g} s", err=True)

    results = run_bench(urls, items, options, progress, starting)
    summary = summary_json(results, options)
    if out is not None:
        _json_out(summary, out)
    if plot_path is not None:
        bench.plot(results, plot_path)
    if as_json:
        _json_out(summary, None)
    else:
        click.echo(bench.render_table(results))
    empty = bench.empty_levels(results)
    for level in empty:
        click.echo(f"error: {level.endpoint} c{level.concurrency}: no request completed", err=True)
    if empty or any(level.failed for level in results):
        sys.exit(1)


@group.command("validate", context_settings={"ignore_unknown_options": True})
@click.option("--version", "version", default=None,
              help="Version whose option table to use (default: the newest).")  # fmt: skip
@click.option("--router", is_flag=True, help="Check router options (smg.launch_router).")
@click.option("--router-tool", type=click.Choice(["smg", "sglang-router"]), default="smg",
              show_default=True, help="Which router's tables --router uses.")  # fmt: skip
@click.option("--model", default="", help="Model path, for model-specific rules (GLM parsers).")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@reports_errors
def validate_command(
    version: str | None, router: bool, router_tool: str, model: str, args: tuple[str, ...]
) -> None:
    """Check any SGLang command line: solver serve validate [--version V] -- --tp-size 8 ..."""
    from solver.errors import ConfigError, NotFound
    from solver.serve import available_versions, errors_of, validate_args

    tool = router_tool if router else "sglang"
    versions = available_versions(tool)
    if not versions:
        raise NotFound(f"no {tool} option tables")
    chosen = version or versions[-1]
    args_list = list(args)
    # accept a pasted launcher: python -m sglang.launch_server / sglang serve
    launchers = (
        ["python3", "-m", "sglang.launch_server"],
        ["python", "-m", "sglang.launch_server"],
        ["sglang", "serve"],
        ["python3", "-m", "sglang_router.launch_router"],
        ["python3", "-m", "smg.launch_router"],
        ["smg", "launch"],
    )
    for launcher in launchers:
        if args_list[: len(launcher)] == launcher:
            args_list = args_list[len(launcher) :]
    findings = validate_args(args_list, chosen, tool=tool, model=model)
    for finding in findings:
        click.echo(finding.line())
    errors = errors_of(findings)
    if errors:
        raise ConfigError(f"{len(errors)} error(s) against {tool} {chosen}")
    click.echo(f"ok: {tool} {chosen} accepts it ({len(findings)} warning(s))")
