"""Proxy configuration: providers (name, base URL, protocol, key variable, models, prices),
deadlines, server settings, and the persisted choice of the active provider.

A config file is TOML::

    active = "local"                      # optional; default: the first provider
    [server]
    host = "127.0.0.1"                    # any other address needs a token
    port = 8788
    token_env = "SOLVER_PROXY_TOKEN"      # the token itself never sits in the file
    telemetry = "proxy-telemetry.sqlite"  # relative to the config file
    store_bodies = false
    [deadlines]                           # seconds
    connect = 10
    first_byte = 300                      # plus first_byte_per_1k_tokens per 1000 prompt tokens
    first_byte_per_1k_tokens = 1.0
    idle = 180
    finish_grace = 30                     # after the finish, for the usage tail / [DONE]
    max_wall = 7200
    keepalive = 15
    open_after = 5
    [[providers]]
    name = "local"
    base_url = "http://127.0.0.1:30000/v1"
    api = "chat"                          # chat | responses | anthropic
    api_key_env = ""                      # name of the variable holding the key
    models = ["*"]                        # client model names routed here (glob patterns)
    upstream_model = "zai-org/GLM-4.6"    # "" sends the client's model name
    split_think = true                    # GLM without a reasoning parser (see below)
    [providers.price]                     # USD per million tokens
    input = 0.0
    cached_input = 0.0
    output = 0.0

``split_think``: GLM with thinking on by default (its template ends the prompt in ``<think>``)
and no reasoning parser sends "reasoning</think>answer" as text. To make that reasoning reach
the client as thinking, the proxy holds Chat text until a ``</think>`` or the end decides it.
Unset (the default), it holds only when the client asked for thinking, so plain answers of
other servers stream at once; ``true`` holds unless the client turned thinking off (a GLM
served without ``--reasoning-parser``); ``false`` never holds.
"""

from __future__ import annotations

import ipaddress
import math
import os
import tomllib
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, cast

from solver.errors import ProxyConfigError, UnknownProvider
from solver.wire import Api

APIS: tuple[Api, ...] = ("chat", "responses", "anthropic")
DEFAULT_PORT = 8788
TOKEN_ENV = "SOLVER_PROXY_TOKEN"


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens."""

    input: float = 0.0
    cached_input: float = 0.0
    output: float = 0.0

    def cost(self, input_tokens: int, cached_tokens: int, output_tokens: int) -> float:
        fresh = max(input_tokens - cached_tokens, 0)
        return (
            fresh * self.input + cached_tokens * self.cached_input + output_tokens * self.output
        ) / 1e6


@dataclass(frozen=True, slots=True)
class Provider:
    name: str
    base_url: str
    api: Api
    api_key_env: str = ""
    models: tuple[str, ...] = ("*",)
    upstream_model: str = ""
    price: Price = field(default_factory=Price)
    split_think: bool | None = None

    def matches(self, model: str) -> bool:
        return any(fnmatchcase(model, pattern) for pattern in self.models)

    def api_key(self) -> str:
        return os.environ.get(self.api_key_env, "") if self.api_key_env else ""

    def url(self, path: str) -> str:
        """``/v1`` is added unless the base URL already ends in a version (``/v1``, ``/v4``)."""
        base = self.base_url.rstrip("/")
        last = base.rsplit("/", 1)[-1]
        if not (len(last) >= 2 and last[0] == "v" and last[1:].isdigit()):
            base += "/v1"
        return base + path


_MAY_BE_ZERO = ("first_byte_per_1k_tokens", "open_after")


@dataclass(frozen=True, slots=True)
class ProxyDeadlines:
    connect: float = 10.0
    first_byte: float = 300.0
    first_byte_per_1k_tokens: float = 1.0
    idle: float = 180.0
    finish_grace: float = 30.0
    max_wall: float = 7200.0
    keepalive: float = 15.0
    open_after: float = 5.0

    def __post_init__(self) -> None:
        """A zero keepalive would ping in a busy loop, a zero idle deadline fail every stream:
        every deadline is a positive, finite number of seconds; only the two that add
        nothing when zero may be zero."""
        for key in ProxyDeadlines.__dataclass_fields__:
            value = getattr(self, key)
            zero_ok = key in _MAY_BE_ZERO
            if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
                least = ">= 0" if zero_ok else "> 0"
                raise ProxyConfigError(f"deadlines.{key} must be a finite number {least}"
                                       f" (got {value})")  # fmt: skip

    def first_byte_for(self, prompt_tokens: int) -> float:
        """Long prompts prefill for minutes with no byte sent (E38): scale the budget."""
        return self.first_byte + self.first_byte_per_1k_tokens * prompt_tokens / 1000


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    providers: tuple[Provider, ...]
    active: str
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token: str = ""
    telemetry: Path | None = None
    store_bodies: bool = False
    deadlines: ProxyDeadlines = field(default_factory=ProxyDeadlines)
    state_file: Path | None = None

    def provider(self, name: str) -> Provider:
        for provider in self.providers:
            if provider.name == name:
                return provider
        names = ", ".join(p.name for p in self.providers)
        raise UnknownProvider(f"no provider named {name!r} (known: {names})")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_binding(config: ProxyConfig) -> None:
    if not is_loopback(config.host) and not config.token:
        raise ProxyConfigError(
            f"binding to {config.host} (not loopback) needs a token: set {TOKEN_ENV} or "
            "server.token_env"
        )


def _section(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ProxyConfigError(f"{where}: [{key}] must be a table")
    return value


_SERVER_KEYS = ("host", "port", "token_env", "telemetry", "store_bodies")


def _known(table: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(table) - set(keys))
    if unknown:
        raise ProxyConfigError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(keys)})")


def _typed(table: dict[str, Any], key: str, kind: type, default: Any, where: str) -> Any:
    value = table.get(key, default)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ProxyConfigError(f"{where}: {key} must be a {kind.__name__}")
    return value


def _provider(raw: Any, where: str) -> Provider:
    if not isinstance(raw, dict):
        raise ProxyConfigError(f"{where} must be a table")
    unknown = set(raw) - {
        "name",
        "base_url",
        "api",
        "api_key_env",
        "models",
        "upstream_model",
        "price",
        "split_think",
    }
    if unknown:
        raise ProxyConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    name = _typed(raw, "name", str, None, where)
    base_url = _typed(raw, "base_url", str, None, where)
    if not base_url.startswith(("http://", "https://")):
        raise ProxyConfigError(f"{where}: base_url must start with http:// or https://")
    api = _typed(raw, "api", str, "chat", where)
    if api not in APIS:
        raise ProxyConfigError(f"{where}: api must be one of {', '.join(APIS)}")
    models = raw.get("models", ["*"])
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models) or not models:
        raise ProxyConfigError(f"{where}: models must be a non-empty list of strings")
    price_table = _section(raw, "price", where)
    price = Price(
        input=_typed(price_table, "input", float, 0.0, f"{where}.price"),
        cached_input=_typed(price_table, "cached_input", float, 0.0, f"{where}.price"),
        output=_typed(price_table, "output", float, 0.0, f"{where}.price"),
    )
    return Provider(
        name=name,
        base_url=base_url,
        api=cast(Api, api),
        api_key_env=_typed(raw, "api_key_env", str, "", where),
        models=tuple(models),
        upstream_model=_typed(raw, "upstream_model", str, "", where),
        price=price,
        split_think=None
        if raw.get("split_think") is None
        else _typed(raw, "split_think", bool, None, where),
    )


def load_config(path: Path) -> ProxyConfig:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProxyConfigError(f"{path}: no such config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProxyConfigError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProxyConfigError(f"{path}: not valid TOML: {exc}") from None
    where = str(path)
    raw_providers = data.get("providers")
    if not isinstance(raw_providers, list) or not raw_providers:
        raise ProxyConfigError(f"{where}: needs at least one [[providers]] table")
    providers = tuple(_provider(p, f"{where}: providers[{i}]") for i, p in enumerate(raw_providers))
    names = [p.name for p in providers]
    if len(set(names)) != len(names):
        raise ProxyConfigError(f"{where}: provider names must be unique")
    _known(data, ("active", "server", "deadlines", "providers"), f"{where}: top level")
    server = _section(data, "server", where)
    _known(server, _SERVER_KEYS, f"{where}: [server]")
    limits = _section(data, "deadlines", where)
    _known(limits, tuple(ProxyDeadlines.__dataclass_fields__), f"{where}: [deadlines]")
    defaults = ProxyDeadlines()
    values = {
        key: _typed(limits, key, float, getattr(defaults, key), f"{where}: deadlines")
        for key in ProxyDeadlines.__dataclass_fields__
    }
    try:
        deadlines = ProxyDeadlines(**values)
    except ProxyConfigError as exc:
        raise ProxyConfigError(f"{where}: {exc}") from None
    port = _typed(server, "port", int, DEFAULT_PORT, f"{where}: server")
    if not 0 <= port <= 65535:
        raise ProxyConfigError(f"{where}: server.port must be 0-65535 (got {port})")
    token_env = _typed(server, "token_env", str, TOKEN_ENV, f"{where}: server")
    telemetry = _typed(server, "telemetry", str, "proxy-telemetry.sqlite", f"{where}: server")
    state_file = path.with_name(path.name + ".active")
    active = _typed(data, "active", str, names[0], where)
    if state_file.exists():
        persisted = state_file.read_text(encoding="utf-8").strip()
        active = persisted if persisted in names else active
    config = ProxyConfig(
        providers=providers,
        active=active,
        host=_typed(server, "host", str, "127.0.0.1", f"{where}: server"),
        port=port,
        token=os.environ.get(token_env, ""),
        telemetry=(path.parent / telemetry) if telemetry else None,
        store_bodies=_typed(server, "store_bodies", bool, False, f"{where}: server"),
        deadlines=deadlines,
        state_file=state_file,
    )
    config.provider(config.active)
    return config


def quick_config(
    upstream: str, api: str, *, host: str, port: int, upstream_model: str = ""
) -> ProxyConfig:
    """One provider, no file: ``solver proxy --upstream URL``."""
    if api not in APIS:
        raise ProxyConfigError(f"--upstream-api must be one of {', '.join(APIS)}")
    if not upstream.startswith(("http://", "https://")):
        raise ProxyConfigError("--upstream must be an http:// or https:// URL")
    provider = Provider(
        name="upstream",
        base_url=upstream,
        api=api,
        api_key_env="SOLVER_UPSTREAM_API_KEY",
        upstream_model=upstream_model,
    )
    return ProxyConfig(
        providers=(provider,),
        active="upstream",
        host=host,
        port=port,
        token=os.environ.get(TOKEN_ENV, ""),
    )


def with_overrides(config: ProxyConfig, **changes: Any) -> ProxyConfig:
    return replace(config, **{k: v for k, v in changes.items() if v is not None})
