"""SGLang's real gateway (smg) on 127.0.0.1 in front of several worker stand-ins
(:mod:`solver.testing.sglang_worker`), each its own process: what the gateway tests and
``bench/router.py`` run.

Every wait is bounded; every process is started here and stopped by its own pid (SIGTERM, then
SIGKILL after 5 s). :meth:`Gateway.kill_worker` SIGKILLs one worker, as a crashed node.

The gateway is started as the recipes start it (``python -m smg.launch_router``), with
``--policy``/``--cache-threshold``/balance options as given, health checks every second (so a
dead worker leaves rotation within seconds, not the default 60 s), Prometheus on its own
loopback port, and logs at ``warn`` into ``DIR/smg.log``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Gateway", "Worker", "free_port", "read_ledger", "reissued", "smg_available"]

_START_TIMEOUT = 30.0


def smg_available() -> bool:
    """Whether ``smg`` (the gateway's wheel) is importable by this interpreter."""
    import importlib.util

    return importlib.util.find_spec("smg") is not None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return int(answer.status), answer.read(1 << 22)
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(timeout=5)


@dataclass
class Worker:
    url: str
    ledger: Path
    proc: subprocess.Popen[bytes]

    def entries(self) -> list[dict[str, Any]]:
        return read_ledger(self.ledger)


def read_ledger(path: Path) -> list[dict[str, Any]]:
    """A worker's ledger lines (a missing file is an empty ledger)."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def reissued(journals: list[Path], ledgers: list[Path]) -> int:
    """Completed answers asked again: attempts a run started for a call after it had received
    an earlier attempt of that call whole (``llm.completed``), plus any request a worker
    answered whole more than once (a gateway retrying a finished request; requests are told
    apart by the client's ``X-Request-ID``, which the journal records on ``llm.started``).
    An answer a worker finished but the run never got whole (the stream was cut on its way,
    or the run was interrupted) is not a completed answer: asking it again is a retry."""
    served: dict[str, int] = {}
    for ledger in ledgers:
        for entry in read_ledger(ledger):
            if entry["event"] == "end" and entry["completed"] and entry.get("request_id"):
                served[entry["request_id"]] = served.get(entry["request_id"], 0) + 1
    again = sum(n - 1 for n in served.values())
    for journal in journals:
        started: dict[str, list[int]] = {}
        completed: dict[str, int] = {}
        for line in journal.read_text().splitlines():
            record = json.loads(line)
            data = record["data"]
            if record["type"] == "llm.started":
                started.setdefault(data["call_id"], []).append(data["attempt"])
            elif record["type"] == "llm.completed":
                first = completed.get(data["call_id"], data["attempt"])
                completed[data["call_id"]] = min(first, data["attempt"])
        for call, first in completed.items():
            again += sum(1 for n in started.get(call, []) if n > first)
    return again


@dataclass
class Gateway:
    """``with Gateway(tmp, workers=2) as gw:`` ... ``gw.url`` is the gateway's base URL."""

    directory: Path
    workers: int = 2
    chunk_delay: float = 0.0
    policy: str = "cache_aware"
    router_args: tuple[str, ...] = ()
    # workers started elsewhere (an in-process FakeEndpoint): the gateway fronts these instead
    external: tuple[str, ...] = ()
    url: str = ""
    metrics_url: str = ""
    pool: list[Worker] = field(default_factory=list)
    _router: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Gateway:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        # all workers start at once: each spends most of its start-up importing
        starting = [] if self.external else [self._spawn_worker(i) for i in range(self.workers)]
        for index, (proc, ledger) in enumerate(starting):
            self.pool.append(self._await_worker(index, proc, ledger))
        urls = list(self.external) or [w.url for w in self.pool]
        port, prometheus = free_port(), free_port()
        argv = [
            sys.executable,
            "-m",
            "smg.launch_router",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--worker-urls",
            *urls,
            "--policy",
            self.policy,
            "--prometheus-host",
            "127.0.0.1",
            "--prometheus-port",
            str(prometheus),
            "--health-check-interval-secs",
            "1",
            "--log-level",
            "warn",
            # a test gateway has nothing to drain when it stops
            "--shutdown-grace-period-secs",
            "0",
            *self.router_args,
        ]
        log = (self.directory / "smg.log").open("wb")
        self._router = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        log.close()
        self.url = f"http://127.0.0.1:{port}"
        self.metrics_url = f"http://127.0.0.1:{prometheus}/metrics"
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            if self._router.poll() is not None:
                raise RuntimeError(f"smg exited {self._router.returncode}: {self.log_tail()}")
            with contextlib.suppress(OSError):
                if len(self.healthy_workers()) == len(urls):
                    return
            time.sleep(0.1)
        raise RuntimeError(f"smg did not list {len(urls)} healthy workers: {self.log_tail()}")

    def _spawn_worker(self, index: int) -> tuple[subprocess.Popen[bytes], Path]:
        ledger = self.directory / f"worker-{index}.jsonl"
        argv = [sys.executable, "-m", "solver.testing.sglang_worker", "--ledger", str(ledger)]
        if self.chunk_delay:
            argv += ["--chunk-delay", str(self.chunk_delay)]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        return proc, ledger

    def _await_worker(self, index: int, proc: subprocess.Popen[bytes], ledger: Path) -> Worker:
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        deadline = time.monotonic() + _START_TIMEOUT
        seen = b""
        while time.monotonic() < deadline and proc.poll() is None:
            seen += proc.stdout.read() or b""
            found = re.search(rb"READY (http://\S+)", seen)
            if found:
                return Worker(url=found.group(1).decode(), ledger=ledger, proc=proc)
            time.sleep(0.02)
        _stop(proc)
        raise RuntimeError(f"worker {index} did not start: {seen[-500:]!r}")

    def healthy_workers(self) -> list[str]:
        """The URLs smg lists as healthy on its ``/workers`` route."""
        status, body = _get(self.url + "/workers")
        if status != 200:
            return []
        listed = json.loads(body).get("workers") or []
        return [w["url"] for w in listed if w.get("is_healthy")]

    def kill_worker(self, index: int) -> None:
        """SIGKILL worker ``index``: its streams are cut mid-way, its port refuses."""
        proc = self.pool[index].proc
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(timeout=5)

    def metrics(self) -> dict[str, float]:
        """smg's Prometheus counters, ``name{labels}`` -> value."""
        status, body = _get(self.metrics_url)
        values: dict[str, float] = {}
        if status != 200:
            return values
        for line in body.decode().splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                with contextlib.suppress(ValueError):
                    values[name] = float(value)
        return values

    def log_tail(self) -> str:
        path = self.directory / "smg.log"
        return path.read_text(errors="replace")[-2000:] if path.is_file() else ""

    def close(self) -> None:
        if self._router is not None:
            _stop(self._router)
        for worker in self.pool:
            _stop(worker.proc)
            if worker.proc.stdout is not None:
                worker.proc.stdout.close()
