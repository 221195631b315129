"""``solver proxy``: the protocol proxy (Claude Code, Codex, Chat tools -> a self-hosted GLM), and
``solver config claude|codex`` (group ``config_agents``): point those tools at it.

Exit codes: 0 ok; 2 bad option or config file (including a non-loopback bind without a
token); 3 the running proxy could not be reached (``proxy use``); 6 unknown provider or no
telemetry database; 130 stopped with Ctrl-C.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

import click
import httpx

from solver._util.masking import mask_url
from solver.cli.errors import reports_errors
from solver.errors import EXIT_INTERRUPTED, ConfigError, EndpointUnavailable, NotFound

P = ParamSpec("P")
R = TypeVar("R")

_APIS = click.Choice(["chat", "responses", "anthropic"])


@click.group("proxy", invoke_without_command=True)
@click.option("--upstream", metavar="URL", help="Serve this one upstream (no config file); its "
              "API key, if any, from SOLVER_UPSTREAM_API_KEY.")  # fmt: skip
@click.option("--upstream-api", type=_APIS, default="chat", show_default=True,
              help="The upstream's protocol.")  # fmt: skip
@click.option("--upstream-model", default="", help="Model name sent upstream (default: the "
              "client's, or the upstream's only served model).")  # fmt: skip
@click.option("--config", "config_file", type=click.Path(path_type=Path),
              help="Providers, deadlines and server settings (TOML).")  # fmt: skip
@click.option("--host", default=None, help="Bind address [127.0.0.1]; others need a token.")
@click.option("--port", type=click.IntRange(0, 65535), default=None, help="Port [8788].")
@click.option("--telemetry", type=click.Path(path_type=Path), default=None,
              help="SQLite telemetry file [proxy-telemetry.sqlite].")  # fmt: skip
@click.option("--store-bodies", is_flag=True, default=None,
              help="Also keep each request body in the telemetry (off by default).")  # fmt: skip
@click.option("--quiet", is_flag=True, help="Print no line per request on stderr.")
@click.pass_context
@reports_errors
def group(
    ctx: click.Context,
    upstream: str | None,
    upstream_api: str,
    upstream_model: str,
    config_file: Path | None,
    host: str | None,
    port: int | None,
    telemetry: Path | None,
    store_bodies: bool | None,
    quiet: bool,
) -> None:
    """Bridge Anthropic Messages, OpenAI Responses and Chat Completions clients to any of those
    upstreams. With no subcommand, serve until Ctrl-C."""
    ctx.obj = {"config_file": config_file, "host": host, "port": port}
    if ctx.invoked_subcommand is not None:
        return
    from solver.proxy import (
        DEFAULT_PORT,
        check_binding,
        check_database,
        load_config,
        quick_config,
        serve,
        with_overrides,
    )

    if upstream and config_file:
        raise ConfigError("give --upstream or --config, not both")
    if config_file is not None:
        config = with_overrides(load_config(config_file), host=host, port=port)
        if telemetry is not None:
            config = with_overrides(config, telemetry=telemetry)
    elif upstream:
        model = upstream_model or _served_model(upstream)
        config = quick_config(
            upstream, upstream_api, host=host or "127.0.0.1",
            port=DEFAULT_PORT if port is None else port, upstream_model=model,
        )  # fmt: skip
        config = with_overrides(config, telemetry=telemetry or Path("proxy-telemetry.sqlite"))
    else:
        raise ConfigError("give --upstream URL (one provider) or --config FILE")
    if store_bodies:
        config = with_overrides(config, store_bodies=True)
    check_binding(config)
    if config.telemetry is not None:
        check_database(config.telemetry)
    names = ", ".join(f"{p.name} ({p.api} {mask_url(p.base_url)})" for p in config.providers)
    click.echo(f"proxy on http://{config.host}:{config.port}  providers: {names}", err=True)
    try:
        # uvicorn shuts down gracefully, then re-raises the signal it caught
        serve(config, quiet=quiet)
    except KeyboardInterrupt:
        click.echo("proxy stopped", err=True)
        sys.exit(EXIT_INTERRUPTED)


def _served_model(upstream: str) -> str:
    """The upstream's model when it serves exactly one (SGLang does); else "" (pass-through)."""
    base = upstream.rstrip("/")
    last = base.rsplit("/", 1)[-1]
    if not (last[:1] == "v" and last[1:].isdigit()):
        base += "/v1"
    try:
        response = httpx.get(base + "/models", timeout=5.0, trust_env=False)
        data = response.json().get("data") if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return ""
    if isinstance(data, list) and len(data) == 1 and isinstance(data[0], dict):
        return str(data[0].get("id") or "")
    return ""


@group.command("use")
@click.argument("name")
@click.option("--url", default=None, help="The running proxy [http://127.0.0.1:PORT].")
@click.pass_context
@reports_errors
def use_command(ctx: click.Context, name: str, url: str | None) -> None:
    """Make provider NAME the active one of the running proxy, live; the proxy remembers it
    for its next start when it runs from a config file. With --config, NAME is checked and
    saved here too (only once the running proxy took it, or when none is running), so a proxy
    that is not running starts with it."""
    import os

    from solver.proxy import DEFAULT_PORT, TOKEN_ENV, load_config, persist_active

    config_file = ctx.obj["config_file"]
    config = load_config(config_file) if config_file is not None else None
    if config is not None:
        config.provider(name)
    port = ctx.obj["port"] or (config.port if config is not None else 0) or DEFAULT_PORT
    target = (url or f"http://127.0.0.1:{port}").rstrip("/")
    token = config.token if config is not None else os.environ.get(TOKEN_ENV, "")
    headers = {"authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.post(
            target + "/admin/active", json={"provider": name}, headers=headers, timeout=10.0,
            trust_env=False,
        )  # fmt: skip
    except httpx.HTTPError:
        if config is None:
            raise EndpointUnavailable(
                f"no proxy answers at {target} (give --url, or --config FILE to save the "
                "choice for the next start)"
            ) from None
        assert config.state_file is not None
        persist_active(config.state_file, name)
        click.echo(f"saved: {name} is active from the next start ({target} is not running)")
        return
    if response.status_code == 401:
        raise ConfigError(f"the proxy at {target} refused the token (set {TOKEN_ENV})")
    if response.status_code == 404:
        raise NotFound(_error_of(response) or f"no provider named {name!r}")
    if response.status_code != 200:
        raise EndpointUnavailable(f"the proxy at {target} answered {response.status_code}")
    if config is not None:  # saved only now: a choice the running proxy refused is not kept
        assert config.state_file is not None
        persist_active(config.state_file, name)
    click.echo(f"active provider: {name} (live at {target})")


def _error_of(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return ""
    return error if isinstance(error, str) else ""


@group.command("stats")
@click.option("--db", type=click.Path(path_type=Path), default=None,
              help="Telemetry file [from --config, else proxy-telemetry.sqlite].")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@reports_errors
def stats_command(ctx: click.Context, db: Path | None, as_json: bool) -> None:
    """Requests, errors, time to first byte, tokens and cost by provider and model."""
    from solver.proxy import load_config, summarise

    if db is None:
        config_file = ctx.obj["config_file"]
        config = load_config(config_file) if config_file else None
        db = (config.telemetry if config else None) or Path("proxy-telemetry.sqlite")
    if not db.exists():
        raise NotFound(f"{db}: no telemetry database (has the proxy run here?)")
    rows = summarise(db)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("no requests recorded")
        return
    head = f"{'provider':<14}{'model':<28}{'reqs':>6}{'errs':>6}{'ttfb p50':>10}{'ttfb p99':>10}"
    tail = f"{'in tok':>10}{'cached':>9}{'out tok':>9}{'reason':>9}{'cost $':>10}{'counts':>8}"
    click.echo(head + tail)
    for r in rows:
        p50 = "-" if r["ttfb_p50_ms"] is None else f"{r['ttfb_p50_ms']:.0f}ms"
        p99 = "-" if r["ttfb_p99_ms"] is None else f"{r['ttfb_p99_ms']:.0f}ms"
        click.echo(
            f"{r['provider'][:13]:<14}{r['model'][:27]:<28}{r['requests']:>6}{r['errors']:>6}"
            f"{p50:>10}{p99:>10}{r['input_tokens']:>10}{r['cached_tokens']:>9}"
            f"{r['output_tokens']:>9}{r['reasoning_tokens']:>9}{r['cost_usd']:>10.4f}"
            f"{r['count_tokens']:>8}"
        )


# ---------------------------------------------------------------- solver config claude|codex


@click.group("config_agents")
def config_agents() -> None:
    """Point Claude Code or Codex at the proxy (mounted as `solver config claude|codex`)."""


def _agent_options(command: Callable[P, R]) -> Callable[P, R]:
    for option in reversed(
        [
            click.option(
                "--proxy",
                "proxy_url",
                default="http://127.0.0.1:8788",
                show_default=True,
                help="The proxy's URL.",
            ),
            click.option(
                "--idle-timeout-ms",
                type=click.IntRange(1000),
                default=600_000,
                show_default=True,
                help="The client's stream idle timeout; above the "
                "proxy's first-byte budget so the proxy decides first.",
            ),
            click.option(
                "--dry-run",
                is_flag=True,
                help="Show the diff, write nothing (with --restore: what restoring would do).",
            ),
            click.option(
                "--restore",
                is_flag=True,
                help="Put the original back; refused when "
                "the file was edited since, unless --force.",
            ),
            click.option(
                "--force",
                is_flag=True,
                help="With --restore: restore even over edits made after config wrote the file.",
            ),
            click.option(
                "--token-env",
                default="",
                help="Variable holding the proxy token, "
                "for a proxy that needs one (its name goes into the file, never the "
                "token).",
            ),
        ]
    ):
        command = option(command)
    return command


def _run_change(
    path: Path, make: Callable[[], object], dry_run: bool, restore: bool, force: bool
) -> None:
    from solver.proxy import Change, apply_change, plan_restore, restore_file

    if force and not restore:
        raise click.UsageError("--force goes with --restore")
    if restore:
        if dry_run:
            plan = plan_restore(path)
            click.echo(plan.describe())
            if plan.edited:
                click.echo(f"{path} was edited after config wrote it (--force needed):")
                click.echo(plan.edited, nl=False)
            return
        if not force:
            plan = plan_restore(path)
            if plan.edited:
                # The diff goes out whole before the one-line error: the user needs to see
                # which edits a forced restore would lose.
                click.echo(plan.edited, nl=False, err=True)
                raise ConfigError(
                    f"{path} was edited after `solver config` wrote it (the diff above); "
                    "restoring would lose those edits: run again with --force to restore anyway"
                )
        click.echo(restore_file(path, force=force))
        return
    change = make()
    assert isinstance(change, Change)
    if dry_run:
        click.echo(change.diff() or f"{path}: already up to date")
        return
    if change.before == change.after:
        click.echo(f"{path}: already up to date")
        return
    backup = apply_change(change)
    where = f" (original kept in {backup.name})" if backup else ""
    click.echo(f"wrote {path}{where}; undo with --restore")


@config_agents.command("claude")
@_agent_options
@click.option("--settings", "settings_path", type=click.Path(path_type=Path), default=None,
              help="Claude Code settings file [~/.claude/settings.json].")  # fmt: skip
@reports_errors
def claude_command(
    proxy_url: str,
    idle_timeout_ms: int,
    dry_run: bool,
    restore: bool,
    force: bool,
    token_env: str,
    settings_path: Path | None,
) -> None:
    """Set ANTHROPIC_BASE_URL, a credential Claude Code accepts (a placeholder token, or an
    apiKeyHelper printing --token-env), CLAUDE_STREAM_IDLE_TIMEOUT_MS and no non-streaming
    fallback."""
    from solver.proxy import claude_change

    path = settings_path or Path.home() / ".claude" / "settings.json"
    _run_change(
        path,
        lambda: claude_change(path, proxy_url, idle_timeout_ms, token_env),
        dry_run,
        restore,
        force,
    )


@config_agents.command("codex")
@_agent_options
@click.option("--codex-config", "codex_path", type=click.Path(path_type=Path), default=None,
              help="Codex config file [~/.codex/config.toml].")  # fmt: skip
@click.option("--model", default="", help="Also set Codex's model name.")
@reports_errors
def codex_command(
    proxy_url: str,
    idle_timeout_ms: int,
    dry_run: bool,
    restore: bool,
    force: bool,
    token_env: str,
    codex_path: Path | None,
    model: str,
) -> None:
    """Add a Responses provider for the proxy (wire_api = "responses") and select it."""
    from solver.proxy import codex_change

    path = codex_path or Path.home() / ".codex" / "config.toml"
    _run_change(
        path,
        lambda: codex_change(path, proxy_url, idle_timeout_ms, model, token_env),
        dry_run,
        restore,
        force,
    )
