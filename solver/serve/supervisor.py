"""Start a model server as a child process, wait until it is ready, and keep it alive.

- Readiness: ``GET /ready`` (SGLang 0.5.20+) until it answers 200; a 404 there switches to
  ``GET /v1/models``, which every version answers. A router (``kind="router"``) is ready on its
  own ``/readiness`` and alive on ``/liveness`` (sglang-router and smg answer 404 on ``/ready``).
- Liveness: a miss is a probe the HTTP server does not answer, or a plain not-OK from the
  fallback routes. SGLang's ``/ready`` answering 503 after the server was up is not a miss: a
  ``/health_generate`` that found no output within ``SGLANG_HEALTH_CHECK_TIMEOUT`` sets the
  server's status to UnHealthy, and ``/ready`` follows that status until a later health probe
  succeeds, so one deep probe landing in an output stall would otherwise restart a busy server
  and kill every stream in flight. ``liveness_failures`` misses in a row, or the process
  exiting, restart it with exponential backoff.
- Hang: the deep probe (``GET /health_generate``, a real one-token generation) is the only
  probe that sees a wedged scheduler (``/ready`` and ``/v1/models`` keep answering). Its client
  timeout stays above the server's own check timeout, so every probe gets the server's verdict
  and no abandoned probe piles up inside SGLang. After a failure it re-probes every
  ``deep_retry_interval`` until the server is Up again. A hang is declared only when deep probes
  have failed for longer than ``hang_after`` (the server's ``--watchdog-timeout``) and the token
  counters of ``/metrics`` (``realtime_tokens_total``, bumped every scheduler iteration) did not
  move over that span; a server without ``/metrics`` is judged
  on the deep probes alone.
- Stop: the whole process tree (its process group plus any descendant that left it) gets
  SIGTERM, then SIGKILL after ``stop_grace``.

Every transition is an :class:`Event`, passed to the ``on_event`` callback (the CLI writes them
to a JSONL log and stderr). The command is data (argv), so tests supervise a fake server.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import httpx

from solver.errors import EndpointUnavailable, InputError
from solver.serve.metrics import read_counters, token_progress

Kind = Literal["server", "router"]
# SGLang's defaults when a deployment does not set them: SGLANG_HEALTH_CHECK_TIMEOUT (seconds a
# /health_generate waits for any output) and --watchdog-timeout (a forward batch longer than
# this crashes the server)
SGLANG_HEALTH_CHECK_TIMEOUT = 20.0
SGLANG_WATCHDOG_TIMEOUT = 300.0


@dataclass(frozen=True, slots=True)
class Policy:
    startup_timeout: float = 1800.0  # weight loading plus graph capture take minutes
    startup_poll: float = 2.0
    liveness_interval: float = 15.0
    liveness_timeout: float = 10.0
    liveness_failures: int = 3
    deep_interval: float = 300.0  # 0 disables the deep probe
    deep_retry_interval: float = 15.0  # after a failed deep probe, until the server is Up again
    # the server's own check timeout; the deep probe's client timeout is this plus deep_margin,
    # so the server always answers first
    health_check_timeout: float = SGLANG_HEALTH_CHECK_TIMEOUT
    deep_margin: float = 30.0
    hang_after: float = SGLANG_WATCHDOG_TIMEOUT  # failing deep probes and frozen counters
    backoff_initial: float = 5.0
    backoff_max: float = 300.0
    max_restarts: int = 20  # consecutive failed restarts before giving up
    # starts in a row that never reached ready: a bad flag or a missing model fails the same way
    # every time, so give up at once rather than after the full backoff series
    max_startup_failures: int = 3
    reset_after: float = 600.0  # this long ready and healthy resets the failure series
    stop_grace: float = 30.0

    @property
    def deep_timeout(self) -> float:
        return self.health_check_timeout + self.deep_margin


@dataclass(frozen=True, slots=True)
class Event:
    # started, ready, exited, unresponsive, restarting, deep-ok, deep-failed, deep-busy,
    # deep-unsupported, not-up, up-again, wedged, stopped, gave-up
    kind: str
    detail: dict[str, Any] = field(default_factory=dict)
    at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="milliseconds"))

    def as_json(self) -> dict[str, Any]:
        return {"at": self.at, "event": self.kind, **self.detail}


@dataclass(frozen=True, slots=True)
class ReadyInfo:
    pid: int
    base_url: str
    model: str
    context_length: int | None
    server_info: dict[str, Any] | None
    model_info: dict[str, Any] | None
    readiness_path: str


class Supervisor:
    """Supervise one server process; :meth:`run` blocks until :meth:`stop` or giving up."""

    def __init__(
        self,
        argv: Sequence[str],
        base_url: str,
        *,
        env: Mapping[str, str] | None = None,
        api_key: str | None = None,
        policy: Policy | None = None,
        output: Path | None = None,
        on_event: Callable[[Event], None] | None = None,
        on_ready: Callable[[ReadyInfo], None] | None = None,
        prepare: Sequence[Sequence[str]] = (),
        teardown: Sequence[Sequence[str]] = (),
        kind: Kind = "server",
    ) -> None:
        if not argv:
            raise InputError("supervisor: empty command")
        self.argv = list(argv)
        self.base_url = base_url.rstrip("/")
        self.env = dict(env or {})
        self.policy = policy or Policy()
        self.output = output
        self.events: list[Event] = []
        self.restarts = 0
        self._api_key = api_key
        self._on_event = on_event
        self._on_ready = on_ready
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self.kind = kind
        self._readiness_path = "/readiness" if kind == "router" else "/ready"
        self._liveness_path = "/liveness" if kind == "router" else "/ready"
        self._deep_thread: threading.Thread | None = None
        self._reprobe = threading.Event()  # wakes the deep probe early: the status is not Up
        self._wedged = threading.Event()  # set by the deep probe, read by the liveness loop
        self._up = True  # the last liveness answer said Up (only SGLang's /ready says otherwise)
        self._prepare = [list(c) for c in prepare]  # run before each start
        self._teardown = [list(c) for c in teardown]  # run at each stop, before the signals

    # ------------------------------------------------------------ public

    @property
    def pid(self) -> int | None:
        with self._lock:
            return self._process.pid if self._process is not None else None

    def stop(self) -> None:
        """Ask :meth:`run` to stop the process tree and return; safe from any thread."""
        self._stop.set()
        self._reprobe.set()

    def run(self) -> None:
        """Start, wait for readiness, supervise. Raises EndpointUnavailable on giving up."""
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        with httpx.Client(headers=headers, trust_env=False) as client:
            try:
                self._loop(client)
            finally:
                self._kill_tree()
                self._emit("stopped", restarts=self.restarts)

    # ------------------------------------------------------------ the loop

    def _loop(self, client: httpx.Client) -> None:
        policy = self.policy
        failures = 0  # consecutive: drives the backoff and giving up; reset by a healthy spell
        never_ready = 0  # consecutive starts that failed before ready
        first = True
        while not self._stop.is_set():
            if not first:
                if never_ready >= policy.max_startup_failures:
                    self._emit("gave-up", restarts=self.restarts, never_ready=never_ready)
                    raise EndpointUnavailable(
                        f"server failed to start {never_ready} times in a row (a configuration "
                        "error?); see the log"
                    )
                if failures > policy.max_restarts:
                    self._emit("gave-up", restarts=self.restarts, consecutive=failures - 1)
                    raise EndpointUnavailable(
                        f"server failed {failures - 1} restarts in a row; see the log"
                    )
                self.restarts += 1
                delay = min(policy.backoff_initial * 2 ** (failures - 1), policy.backoff_max)
                self._emit("restarting", restart=self.restarts, backoff_s=delay)
                self._kill_tree()
                if self._stop.wait(delay):
                    return
            first = False
            self._start()
            if not self._await_ready(client):
                failures += 1
                never_ready += 1
                continue
            never_ready = 0
            ready_at = time.monotonic()
            self._supervise(client)
            # a server that served well for a while before failing starts a fresh series: hours
            # of sessions must not accumulate toward giving up or the longest backoff
            if time.monotonic() - ready_at >= policy.reset_after:
                failures = 0
            failures += 1

    def _start(self) -> None:
        env = {**os.environ, **self.env}
        for command in self._prepare:
            self._run_helper(command, env)
        sink: Any = subprocess.DEVNULL
        if self.output is not None:
            self.output.parent.mkdir(parents=True, exist_ok=True)
            sink = self.output.open("ab")
        try:
            process = subprocess.Popen(
                self.argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: the whole tree stops together
            )
        except OSError as exc:
            raise InputError(f"cannot start {self.argv[0]}: {exc.strerror or exc}") from None
        finally:
            if sink is not subprocess.DEVNULL:
                sink.close()
        with self._lock:
            self._process = process
        self._emit("started", pid=process.pid, argv0=self.argv[0])

    def _await_ready(self, client: httpx.Client) -> bool:
        policy = self.policy
        deadline = time.monotonic() + policy.startup_timeout
        while not self._stop.is_set():
            code = self._exit_code()
            if code is not None:
                self._emit("exited", pid=self.pid, code=code, phase="startup")
                return False
            if self._probe(client, self._readiness_path, policy.liveness_timeout) == "up":
                info = self._describe(client)
                self._emit(
                    "ready", pid=info.pid, model=info.model, readiness=info.readiness_path,
                    version=(info.server_info or {}).get("version"),
                )  # fmt: skip
                if self._on_ready is not None:
                    self._on_ready(info)
                return True
            if time.monotonic() > deadline:
                self._emit("unresponsive", phase="startup", waited_s=policy.startup_timeout)
                return False
            self._stop.wait(policy.startup_poll)
        return False

    def _supervise(self, client: httpx.Client) -> None:
        self._wedged.clear()
        self._up = True
        session = threading.Event()  # ends with this server instance: its deep probe stops too
        self._start_deep_probe(session)
        try:
            self._watch(client)
        finally:
            session.set()
            self._reprobe.set()

    def _watch(self, client: httpx.Client) -> None:
        policy = self.policy
        misses = 0
        while not self._stop.wait(policy.liveness_interval):
            code = self._exit_code()
            if code is not None:
                self._emit("exited", pid=self.pid, code=code, phase="serving")
                return
            if self._wedged.is_set():
                return  # the deep probe emitted "wedged" with its evidence
            answer = self._probe(client, self._liveness_path, policy.liveness_timeout)
            if answer == "down":
                misses += 1
                if misses >= policy.liveness_failures:
                    self._emit(
                        "unresponsive", pid=self.pid, misses=misses, probe=self._liveness_path
                    )
                    return
                continue
            misses = 0
            up = answer == "up"
            if up != self._up:
                # answering but not Up: a health probe failed (ours or anyone's); the deep probe
                # re-checks now rather than at its next interval
                self._emit("up-again" if up else "not-up", pid=self.pid)
                self._up = up
            if not up:
                self._reprobe.set()

    # ------------------------------------------------------------ probes

    def _probe(self, client: httpx.Client, path: str, timeout: float) -> str:
        """ "up", "not-up" (SGLang's /ready answered 503: alive, status not Up) or "down".

        Learns once whether the server has /ready at all (older SGLang, vLLM, llama.cpp)."""
        try:
            response = client.get(self.base_url + path, timeout=timeout)
        except httpx.HTTPError:
            return "down"
        if response.status_code == 200:
            return "up"
        if path == "/ready" and response.status_code == 404:
            self._readiness_path = self._liveness_path = "/v1/models"
            return self._probe(client, "/v1/models", timeout)
        if path == "/ready" and response.status_code == 503:
            return "not-up"
        return "down"

    def _describe(self, client: httpx.Client) -> ReadyInfo:
        model, context = "", None
        models = _get_json(client, self.base_url + "/v1/models")
        if models and isinstance(models.get("data"), list) and models["data"]:
            first = models["data"][0]
            model = str(first.get("id", ""))
            raw_context = first.get("max_model_len")
            context = raw_context if isinstance(raw_context, int) else None
        server_info = _get_json(client, self.base_url + "/server_info") or _get_json(
            client, self.base_url + "/get_server_info"
        )
        if context is None and server_info and isinstance(server_info.get("context_length"), int):
            context = server_info["context_length"]
        if context is None:  # llama.cpp reports its per-slot context in /props
            settings = (_get_json(client, self.base_url + "/props") or {}).get(
                "default_generation_settings"
            )
            n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
            context = n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None
        return ReadyInfo(
            pid=self.pid or 0,
            base_url=self.base_url,
            model=model,
            context_length=context,
            server_info=server_info,
            model_info=_get_json(client, self.base_url + "/model_info"),
            readiness_path=self._readiness_path,
        )

    def _start_deep_probe(self, session: threading.Event) -> None:
        if self.policy.deep_interval <= 0 or self.kind == "router":
            return  # a router's own /health_generate only forwards to some worker
        self._deep_thread = threading.Thread(target=self._deep_loop, args=(session,), daemon=True)
        self._deep_thread.start()

    def _deep_loop(self, session: threading.Event) -> None:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        with httpx.Client(headers=headers, trust_env=False) as client:
            _DeepProbe(self, client, session).run()

    # ------------------------------------------------------------ process tree

    # ------------------------------------------------------------ process tree

    def _exit_code(self) -> int | None:
        with self._lock:
            process = self._process
        return None if process is None else process.poll()

    def _kill_tree(self) -> None:
        with self._lock:
            process = self._process
            self._process = None
        if process is None:
            return
        for command in self._teardown:
            self._run_helper(command, {**os.environ, **self.env})
        pids = [process.pid, *_descendants(process.pid)]
        _signal_all(process.pid, pids, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=self.policy.stop_grace)
        _signal_all(process.pid, pids, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)

    def _run_helper(self, command: list[str], env: dict[str, str]) -> None:
        """A cleanup command (docker rm/stop): its failure is logged, never fatal."""
        try:
            done = subprocess.run(
                command,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=self.policy.stop_grace + 30,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            self._emit("helper-failed", argv=command, error=type(exc).__name__)
            return
        self._emit("helper", argv=command, code=done.returncode)

    def _emit(self, kind: str, **detail: Any) -> None:
        event = Event(kind, detail)
        self.events.append(event)
        if self._on_event is not None:
            self._on_event(event)


class _DeepProbe:
    """The deep-probe loop of one server instance: busy or wedged, from probes and counters."""

    def __init__(
        self, supervisor: Supervisor, client: httpx.Client, session: threading.Event
    ) -> None:
        self.sup, self.client, self.session = supervisor, client, session
        self.policy = supervisor.policy

    def run(self) -> None:
        policy = self.policy
        failing_since: float | None = None  # first failure of the current failing spell
        progress_then: float | None = None  # token counters at the start of the hang window
        wait = policy.deep_interval
        while not self._sleep(wait):
            started = time.monotonic()
            status = self._probe()
            took = round(time.monotonic() - started, 3)
            if self._ended():
                return
            if status == 404:  # not SGLang (llama.cpp, vLLM): no generation probe to run
                self.sup._emit("deep-unsupported", path="/health_generate")
                return
            if status == 200:
                if failing_since is None:
                    self.sup._emit("deep-ok", status=status, took_s=took)
                else:
                    spell = round(time.monotonic() - failing_since, 3)
                    self.sup._emit("deep-ok", status=status, took_s=took, failed_for_s=spell)
                failing_since, wait = None, policy.deep_interval
                continue
            now = time.monotonic()
            if failing_since is None:
                failing_since, progress_then = started, self._progress()
            failing_for = round(now - failing_since, 3)
            self.sup._emit("deep-failed", status=status, took_s=took, failing_for_s=failing_for)
            wait = policy.deep_retry_interval
            if failing_for < policy.hang_after:
                continue
            progress_now = self._progress()
            moving = progress_now is not None and progress_then is not None
            if moving and progress_now != progress_then:
                # output stalls longer than the check timeout, yet tokens keep coming: busy
                moved = (progress_now or 0.0) - (progress_then or 0.0)
                self.sup._emit("deep-busy", failing_for_s=failing_for, tokens=moved)
                failing_since, progress_then = now, progress_now
                continue
            counters = "unavailable" if progress_now is None else "frozen"
            self.sup._emit("wedged", pid=self.sup.pid, failing_for_s=failing_for, counters=counters)
            self.sup._wedged.set()
            return

    def _sleep(self, seconds: float) -> bool:
        """Wait ``seconds`` or until woken; True when this instance's supervision ended."""
        deadline = time.monotonic() + seconds
        while not self._ended():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if self.sup._reprobe.wait(remaining):
                self.sup._reprobe.clear()
                return self._ended()
        return True

    def _ended(self) -> bool:
        return self.sup._stop.is_set() or self.session.is_set()

    def _probe(self) -> int | str:
        try:
            response = self.client.get(
                self.sup.base_url + "/health_generate", timeout=self.policy.deep_timeout
            )
        except httpx.HTTPError as exc:
            return type(exc).__name__
        return response.status_code

    def _progress(self) -> float | None:
        counters = read_counters(self.client, self.sup.base_url, self.policy.liveness_timeout)
        return token_progress(counters)


def _get_json(client: httpx.Client, url: str) -> dict[str, Any] | None:
    try:
        response = client.get(url, timeout=30)
        if response.status_code != 200:
            return None
        body = response.json()
    except (httpx.HTTPError, ValueError):
        return None
    return body if isinstance(body, dict) else None


def _descendants(root: int) -> list[int]:
    """All descendants of ``root`` from /proc (Linux); empty elsewhere."""
    children: dict[int, list[int]] = {}
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # the command name may contain spaces and parentheses: split after the last ')'
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _signal_all(group: int, pids: list[int], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, sig)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
