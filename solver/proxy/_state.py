"""What every request of one running proxy shares: config, the active provider, upstream
clients, metrics and the telemetry writer."""

from __future__ import annotations

import os
import time
from pathlib import Path

from solver.llm import redact

from ._config import Provider, ProxyConfig, ProxyConfigError
from ._metrics import Metrics
from ._telemetry import RequestRecord, TelemetryWriter
from ._upstream import UpstreamClients


class Breaker:
    """Per-provider circuit breaker: after ``threshold`` consecutive failures before any output
    (or a ``Retry-After``), the provider goes to the back of the failover order until the
    cool-down ends. It is never skipped outright: with every provider cooling down, requests
    still go out in order rather than fail unasked."""

    def __init__(self, threshold: int = 4, cooldown: float = 60.0) -> None:
        self.threshold = threshold
        self.cooldown = cooldown
        self._failures: dict[str, int] = {}
        self._open_until: dict[str, float] = {}

    def cooling(self, name: str) -> bool:
        until = self._open_until.get(name)
        return until is not None and time.monotonic() < until

    def failure(self, name: str, retry_after: float | None) -> None:
        count = self._failures.get(name, 0) + 1
        self._failures[name] = count
        wait = retry_after
        if count >= self.threshold:
            wait = max(wait or 0.0, self.cooldown)
        if wait:
            self._open_until[name] = time.monotonic() + wait

    def success(self, name: str) -> None:
        self._failures.pop(name, None)
        self._open_until.pop(name, None)


class ProxyState:
    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.active = config.active
        self.metrics = Metrics()
        self.breaker = Breaker()
        self.clients: UpstreamClients | None = None
        self.telemetry: TelemetryWriter | None = None

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
