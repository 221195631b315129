"""Protocol proxy: Claude Code (Anthropic Messages), Codex (OpenAI Responses) and Chat
Completions tools on any of those upstreams, through the canonical events of ``solver.wire``.

Public API::

    load_config(path) -> ProxyConfig            # TOML file, see _config's docstring
    quick_config(upstream, api, host=, port=)   # one provider, no file
    build_app(config) -> Starlette              # the ASGI app (state at app.state.proxy)
    serve(config)                               # uvicorn in the foreground
    ProxyServer(config)                         # context manager: a thread, .url, .state
    summarise(telemetry_path) -> list[dict]     # `solver proxy stats`
    claude_change(path, url, idle_ms) / codex_change(path, url, idle_ms, model) -> Change
    apply_change(change) -> backup path; restore_file(path, force=) -> message
    plan_restore(path) -> Restore                # what --restore would do (--dry-run)

"""

from solver.errors import ProxyConfigError

from ._agents import Change, Restore, claude_change, codex_change, plan_restore
from ._agents import apply as apply_change
from ._agents import restore as restore_file
from ._app import build_app
from ._config import (
    DEFAULT_PORT,
    TOKEN_ENV,
    Price,
    Provider,
    ProxyConfig,
    ProxyDeadlines,
    check_binding,
    is_loopback,
    load_config,
    quick_config,
    with_overrides,
)
from ._server import ProxyServer, serve
from ._signature import BRIDGE_PREFIX
from ._state import persist_active
from ._telemetry import RequestRecord, check_database, summarise

__all__ = [
    "BRIDGE_PREFIX",
    "DEFAULT_PORT",
    "TOKEN_ENV",
    "Change",
    "Price",
    "Provider",
    "ProxyConfig",
    "ProxyConfigError",
    "ProxyDeadlines",
    "ProxyServer",
    "RequestRecord",
    "Restore",
    "apply_change",
    "build_app",
    "check_binding",
    "check_database",
    "claude_change",
    "codex_change",
    "is_loopback",
    "load_config",
    "persist_active",
    "plan_restore",
    "quick_config",
    "restore_file",
    "serve",
    "summarise",
    "with_overrides",
]
