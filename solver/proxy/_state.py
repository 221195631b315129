"""What every request of one running proxy shares: config, the active provider, upstream
clients, metrics and the telemetry writer."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TextIO

from solver.errors import ProxyConfigError
from solver.wire import redact

from ._config import Provider, ProxyConfig
from ._metrics import Metrics
from ._requestlog import write_line
from ._telemetry import RequestRecord, TelemetryWriter
from ._upstream import UpstreamClients


class Breaker:
    """Per-provider circuit breaker: after ``threshold`` consecutive failures before any output
    (or a ``Retry-After``), the provider goes to the back of the failover order until the
    cool-down ends; with every provider cooling down, requests still go out in order rather
    than fail unasked.

    A provider that let a first-byte deadline pass is *down*: for ``down_for`` seconds (or
    until it answers again) requests that only it and other down providers could serve fail
    at once, with the reason, instead of each waiting out a full first-byte deadline again
    (an agent retrying a dead upstream would otherwise wait that long per retry)."""

    def __init__(self, threshold: int = 4, cooldown: float = 60.0, down_for: float = 60.0) -> None:
        self.threshold = threshold
        self.cooldown = cooldown
        self.down_for = down_for
        self._failures: dict[str, int] = {}
        self._open_until: dict[str, float] = {}
        self._down: dict[str, tuple[float, str]] = {}  # name -> (until, why)

    def cooling(self, name: str) -> bool:
        now = time.monotonic()
        until = max(self._open_until.get(name, 0.0), self._down.get(name, (0.0, ""))[0])
        return now < until

    def failure(self, name: str, retry_after: float | None) -> None:
        count = self._failures.get(name, 0) + 1
        self._failures[name] = count
        wait = retry_after
        if count >= self.threshold:
            wait = max(wait or 0.0, self.cooldown)
        if wait:
            self._open_until[name] = time.monotonic() + wait

    def down(self, name: str, why: str) -> None:
        self._down[name] = (time.monotonic() + self.down_for, why)

    def all_down(self, names: list[str]) -> tuple[str, float] | None:
        """When every one of ``names`` is down: why, and the seconds until the first of them
        may be tried again; else None."""
        now = time.monotonic()
        reasons: list[str] = []
        soonest = float("inf")
        for name in names:
            until, why = self._down.get(name, (0.0, ""))
            if until <= now:
                return None
            reasons.append(f"{name}: {why}")
            soonest = min(soonest, until - now)
        if not reasons:
            return None
        return "; ".join(reasons), soonest

    def success(self, name: str) -> None:
        self._failures.pop(name, None)
        self._open_until.pop(name, None)
        self._down.pop(name, None)


class ProxyState:
    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.active = config.active
        self.metrics = Metrics()
        self.breaker = Breaker()
        self.clients: UpstreamClients | None = None
        self.telemetry: TelemetryWriter | None = None
        # where the one line per request goes (the CLI's stderr unless --quiet); None: nowhere
        self.request_log: TextIO | None = None

    async def open(self) -> None:
        self.clients = UpstreamClients(self.config.providers, self.config.deadlines)
        if self.config.telemetry is not None:
            self.telemetry = TelemetryWriter(self.config.telemetry)

    async def close(self) -> None:
        if self.clients is not None:
            await self.clients.aclose()
            self.clients = None
        if self.telemetry is not None:
            self.telemetry.close()
            self.telemetry = None

    def route(self, model: str) -> list[Provider]:
        """Providers serving ``model``: the active one first, then the rest in config order
        (the failover order); providers whose breaker is open go last."""
        matching = [p for p in self.config.providers if p.matches(model)]
        matching.sort(key=lambda p: (self.breaker.cooling(p.name), p.name != self.active))
        return matching

    def use(self, name: str) -> Provider:
        provider = self.config.provider(name)
        self.active = name
        state_file = self.config.state_file
        if state_file is not None:
            persist_active(state_file, name)
        return provider

    def redact(self, text: str) -> str:
        """``text`` without any upstream key or the proxy's token (read now: keys come from
        the environment and may change while the proxy runs)."""
        secrets = [p.api_key() for p in self.config.providers]
        return redact(text, [*secrets, self.config.token])

    def record(self, record: RequestRecord) -> None:
        if record.error:
            record.error = self.redact(record.error)[:300]
        if self.telemetry is not None:
            self.telemetry.put(record)
        if self.request_log is not None:
            write_line(self.request_log, record)


def persist_active(state_file: Path, name: str) -> None:
    """Atomic write of the active provider's name next to the config file."""
    tmp = state_file.with_name(state_file.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(name + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, state_file)
    except OSError as exc:
        raise ProxyConfigError(f"{state_file}: cannot save the active provider: {exc}") from None
