"""An AttemptObserver that keeps everything it is told, for assertions."""

from __future__ import annotations

import io
from dataclasses import dataclass, field

from solver.llm import AttemptEnd, AttemptStart, Connection, RetryNotice, StreamEvent


@dataclass
class Recorder:
    starts: list[AttemptStart] = field(default_factory=list)
    ends: list[AttemptEnd] = field(default_factory=list)
    sinks: list[io.BytesIO] = field(default_factory=list)
    connections: list[Connection] = field(default_factory=list)
    events: list[StreamEvent] = field(default_factory=list)
    retries: list[RetryNotice] = field(default_factory=list)

    def attempt_started(self, start: AttemptStart) -> io.BytesIO:
        assert len(self.starts) == len(self.ends), "an attempt started before the last ended"
        self.starts.append(start)
        self.sinks.append(io.BytesIO())
        return self.sinks[-1]

    def attempt_ended(self, start: AttemptStart, end: AttemptEnd) -> None:
        assert start is self.starts[-1]
        self.ends.append(end)

    def connection_opened(self, conn: Connection) -> None:
        self.connections.append(conn)

    def on_event(self, event: StreamEvent) -> None:
        self.events.append(event)

    def retry_scheduled(self, notice: RetryNotice) -> None:
        self.retries.append(notice)
