"""What every request of one running proxy shares: config, the active provider, upstream
clients, metrics and the telemetry writer."""

from __future__ import annotations

import os
from pathlib import Path

from ._config import Provider, ProxyConfig, ProxyConfigError
from ._metrics import Metrics
from ._telemetry import RequestRecord, TelemetryWriter
from ._upstream import UpstreamClients


class ProxyState:
    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.active = config.active
        self.metrics = Metrics()
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
        (the failover order)."""
        matching = [p for p in self.config.providers if p.matches(model)]
        matching.sort(key=lambda p: p.name != self.active)
        return matching

    def use(self, name: str) -> Provider:
        provider = self.config.provider(name)
        self.active = name
        state_file = self.config.state_file
        if state_file is not None:
            persist_active(state_file, name)
        return provider

    def record(self, record: RequestRecord) -> None:
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
