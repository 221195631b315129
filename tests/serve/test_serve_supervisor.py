"""The supervisor against a real server process (solver/testing/fake_sglang.py run as a child,
with SGLang 0.5.23's health state machine: deep probes set the status, /ready follows it)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from solver.serve.supervisor import Event, Kind, Policy, Supervisor

FAST = Policy(
    startup_timeout=60,
    startup_poll=0.05,
    liveness_interval=0.1,
    liveness_timeout=2,
    liveness_failures=2,
    deep_interval=0,
    backoff_initial=0.05,
    backoff_max=0.2,
    max_restarts=5,
    stop_grace=5,
)
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 60) -> None:
    """Poll observable state; the bound only guards against a hang."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[-1].split()[0] == "Z")


def fake_argv(port: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "solver.testing.fake_sglang", "--port", str(port), *extra]


class Running:
    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.supervisor.run()
        except BaseException as exc:  # surfaced by the test
            self.error = exc

    def kinds(self) -> list[str]:
        return [e.kind for e in self.supervisor.events]

    def count(self, kind: str) -> int:
        return self.kinds().count(kind)

    def stop(self) -> None:
        self.supervisor.stop()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()


@pytest.fixture
def control(tmp_path: Path) -> Path:
    path = tmp_path / "control.json"
    path.write_text("{}")
    return path


@pytest.fixture
def start(control: Path) -> Iterator[Callable[..., Running]]:
    running: list[Running] = []

    def make(
        *extra: str,
        policy: Policy = FAST,
        on_event: Callable[[Event], None] | None = None,
        kind: Kind = "server",
    ) -> Running:
        port = free_port()
        argv = fake_argv(port, "--control", str(control), *extra)
        sup = Supervisor(
            argv,
            f"http://127.0.0.1:{port}",
            env={"PYTHONPATH": str(ROOT)},
            policy=policy,
            on_event=on_event,
            kind=kind,
        )
        run = Running(sup)
        running.append(run)
        return run

    yield make
    for run in running:
        run.stop()


def test_ready_then_killed_process_restarts(start: Callable[..., Running]) -> None:
    run = start()
    wait_for(lambda: run.count("ready") == 1, "first readiness")
    first = run.supervisor.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: run.count("ready") == 2, "readiness after restart")
    assert run.supervisor.restarts == 1
    assert "exited" in run.kinds() and "restarting" in run.kinds()
    assert run.supervisor.pid not in (None, first)
    assert not alive(first)


def test_failing_liveness_restarts(start: Callable[..., Running], control: Path) -> None:
    def heal(event: Event) -> None:
        if event.kind == "restarting":
            control.write_text("{}")

    run = start(on_event=heal)
    wait_for(lambda: run.count("ready") == 1, "first readiness")
    first = run.supervisor.pid
    control.write_text(json.dumps({"unresponsive": True}))
    wait_for(lambda: run.count("ready") == 2, "readiness after the liveness restart")
    kinds = run.kinds()
    assert kinds.index("unresponsive") < kinds.index("restarting")
    assert run.supervisor.restarts == 1
    assert first is not None and not alive(first)


def test_slow_deep_health_does_not_restart(start: Callable[..., Running], control: Path) -> None:
    control.write_text(json.dumps({"health_generate_delay": 30}))
    # retried at once, not after the default 15 s: three failures are the subject, not the wait
    policy = replace(
        FAST, deep_interval=0.05, deep_retry_interval=0.05, health_check_timeout=0.1,
        deep_margin=0.1,
    )  # fmt: skip
    run = start(policy=policy)
    wait_for(lambda: run.count("deep-failed") >= 3, "three failed deep probes")
    assert run.supervisor.restarts == 0
    assert "unresponsive" not in run.kinds() and "restarting" not in run.kinds()


def test_old_server_without_ready_uses_v1_models(start: Callable[..., Running]) -> None:
    run = start("--no-ready")
    wait_for(lambda: run.count("ready") == 1, "readiness")
    ready = next(e for e in run.supervisor.events if e.kind == "ready")
    assert ready.detail["readiness"] == "/v1/models"
    assert ready.detail["model"] == "glm-fake"


def test_gives_up_after_max_restarts(tmp_path: Path) -> None:
    policy = replace(FAST, max_restarts=2)
    sup = Supervisor(
        [sys.executable, "-c", "raise SystemExit(3)"], "http://127.0.0.1:9", policy=policy
    )
    from solver.errors import EndpointUnavailable

    with pytest.raises(EndpointUnavailable):
        sup.run()
    assert [e.kind for e in sup.events].count("exited") == 3
    assert sup.events[-1].kind == "stopped"
    # consecutive failures double the backoff
    backoffs = [e.detail["backoff_s"] for e in sup.events if e.kind == "restarting"]
    assert backoffs == [FAST.backoff_initial, 2 * FAST.backoff_initial]


def test_a_server_that_never_starts_gives_up_after_three_tries() -> None:
    # a startup configuration error: the full restart series (20 here) would take over an hour
    policy = replace(FAST, max_restarts=20)
    sup = Supervisor(
        [sys.executable, "-c", "raise SystemExit(3)"], "http://127.0.0.1:9", policy=policy
    )
    from solver.errors import EndpointUnavailable

    with pytest.raises(EndpointUnavailable, match="failed to start 3 times"):
        sup.run()
    assert [e.kind for e in sup.events].count("exited") == policy.max_startup_failures == 3
    gave_up = next(e for e in sup.events if e.kind == "gave-up")
    assert gave_up.detail["never_ready"] == 3


def test_prepare_runs_before_each_start_and_teardown_at_each_stop(tmp_path: Path) -> None:
    # what container mode uses for `docker rm -f NAME` and `docker stop NAME`
    trace = tmp_path / "trace"

    def note(mark: str) -> list[str]:
        return [sys.executable, "-c", f"open({str(trace)!r}, 'a').write({mark!r})"]

    sup = Supervisor(
        [sys.executable, "-c", f"open({str(trace)!r}, 'a').write('S'); raise SystemExit(3)"],
        "http://127.0.0.1:9",
        policy=replace(FAST, max_startup_failures=2),
        prepare=[note("p")],
        teardown=[note("t")],
    )
    from solver.errors import EndpointUnavailable

    with pytest.raises(EndpointUnavailable):
        sup.run()
    assert trace.read_text() == "pSt" + "pSt"


def test_ctrl_c_stops_server_and_its_children(tmp_path: Path) -> None:
    port = free_port()
    child_file = tmp_path / "child.pid"
    state = tmp_path / "state"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "XDG_STATE_HOME": str(state),
        "SOLVER_ENDPOINT_FILE": str(tmp_path / "endpoint.json"),
    }
    code = "from solver.cli.serve import group; group()"
    server = fake_argv(port, "--child-pid-file", str(child_file))
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-c", code, "supervise", "--url", url, "--liveness-interval", "0.1"]
    cmd += ["--", *server]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        descriptor = tmp_path / "endpoint.json"
        wait_for(descriptor.exists, "the endpoint descriptor")
        written = json.loads(descriptor.read_text())
        assert written["base_url"] == f"http://127.0.0.1:{port}/v1"
        assert written["model"] == "glm-fake" and written["context_length"] == 131072
        server_pid = int(written["pid"])
        wait_for(child_file.exists, "the grandchild pid")
        grandchild = int(child_file.read_text())
        assert alive(server_pid) and alive(grandchild)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    wait_for(lambda: not alive(server_pid) and not alive(grandchild), "the tree to stop", 20)
    assert not descriptor.exists()
    events = (state / "olympiad-solver" / "serve" / "custom.events.jsonl").read_text()
    assert '"event": "ready"' in events and '"event": "stopped"' in events


def test_server_without_deep_probe_is_logged_once(tmp_path: Path) -> None:
    """A non-SGLang server (404 on /health_generate) is not 'slow' forever: logged once."""
    from solver.testing import FakeEndpoint
    from solver.testing.fake_endpoint import Reply

    with FakeEndpoint(lambda request: Reply(text="x")) as fake:
        argv = [sys.executable, "-c", "import time; time.sleep(60)"]
        sup = Supervisor(argv, fake.url, policy=replace(FAST, deep_interval=0.05))
        run = Running(sup)
        try:
            wait_for(lambda: run.count("deep-unsupported") == 1, "the deep probe to give up")
            time.sleep(0.3)  # several more deep intervals pass: still one event, no restart
            assert run.count("deep-unsupported") == 1 and run.count("deep-failed") == 0
            assert sup.restarts == 0
        finally:
            run.stop()


def test_a_healthy_spell_resets_backoff_and_the_give_up_count(
    start: Callable[..., Running],
) -> None:
    run = start(policy=replace(FAST, max_restarts=1, reset_after=0.3))
    for round_ in range(1, 4):
        wait_for(lambda r=round_: run.count("ready") == r, f"readiness #{round_}")
        time.sleep(0.4)  # healthy for longer than reset_after
        pid = run.supervisor.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: run.count("ready") == 4, "readiness after the third restart")
    restarts = [e for e in run.supervisor.events if e.kind == "restarting"]
    # three restarts with max_restarts=1, each at the initial backoff
    assert len(restarts) == 3
    assert {e.detail["backoff_s"] for e in restarts} == {FAST.backoff_initial}
    assert "gave-up" not in run.kinds()


class Stream:
    """One streaming chat request in a thread: the load a restart would cut."""

    def __init__(self, url: str, tokens: int) -> None:
        self.url, self.tokens = url, tokens
        self.received = 0
        self.error: str | None = None
        self.done = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        body = {"model": "glm-fake", "stream": True, "max_tokens": self.tokens, "messages": []}
        try:
            with httpx.stream(
                "POST", self.url + "/v1/chat/completions", json=body, timeout=60
            ) as response:
                for line in response.iter_lines():
                    if line.startswith("data: {") and '"content"' in line:
                        self.received += 1
        except httpx.HTTPError as exc:
            self.error = type(exc).__name__
        finally:
            self.done.set()


def after(run: Running, first: str, then: str) -> bool:
    kinds = run.kinds()
    return first in kinds and then in kinds[kinds.index(first) + 1 :]


def test_an_output_stall_under_load_never_restarts(
    start: Callable[..., Running], control: Path
) -> None:
    # SGLang 0.5.20+: the stalled deep probe sets the status UnHealthy and /ready answers 503
    # until a later probe succeeds; the old supervisor restarted the server there
    policy = replace(
        FAST, deep_interval=0.2, deep_retry_interval=0.2, health_check_timeout=1,
        deep_margin=1, hang_after=8,
    )  # fmt: skip
    run = start(
        "--rate", "50", "--health-check-timeout", "1", "--health-poll", "0.1", policy=policy
    )
    wait_for(lambda: run.count("ready") == 1, "readiness")
    stream = Stream(run.supervisor.base_url, tokens=300)
    wait_for(lambda: stream.received > 20, "the stream to flow")
    control.write_text(json.dumps({"stall_until": time.time() + 4}))
    wait_for(lambda: run.count("deep-failed") >= 1, "a deep probe inside the stall")
    wait_for(lambda: run.count("not-up") >= 1, "/ready to follow the failed probe")
    wait_for(stream.done.is_set, "the stream to finish")
    wait_for(lambda: after(run, "deep-failed", "up-again"), "the status to be Up again")
    assert stream.error is None and stream.received == 300
    assert run.supervisor.restarts == 0
    assert not {"unresponsive", "wedged", "restarting"} & set(run.kinds())


def test_a_busy_server_whose_deep_probes_fail_is_not_wedged(
    start: Callable[..., Running], control: Path
) -> None:
    # deep probes never answer in time, but the token counters keep moving: busy, not hung
    control.write_text(json.dumps({"health_generate_delay": 30}))
    policy = replace(
        FAST, deep_interval=0.1, deep_retry_interval=0.1, health_check_timeout=0.1,
        deep_margin=0.1, hang_after=0.5,
    )  # fmt: skip
    run = start("--rate", "100", policy=policy)
    wait_for(lambda: run.count("ready") == 1, "readiness")
    stream = Stream(run.supervisor.base_url, tokens=1500)
    wait_for(lambda: run.count("deep-busy") >= 2, "two busy verdicts")
    assert run.supervisor.restarts == 0 and "wedged" not in run.kinds()
    busy = next(e for e in run.supervisor.events if e.kind == "deep-busy")
    assert busy.detail["tokens"] > 0
    assert not stream.done.is_set() or stream.error is None


def test_a_wedged_scheduler_is_restarted_once(start: Callable[..., Running], control: Path) -> None:
    policy = replace(
        FAST, deep_interval=0.2, deep_retry_interval=0.1, health_check_timeout=0.5,
        deep_margin=0.5, hang_after=1.5,
    )  # fmt: skip
    run = start("--health-check-timeout", "0.5", "--health-poll", "0.1", policy=policy)
    wait_for(lambda: run.count("ready") == 1, "first readiness")
    first = run.supervisor.pid
    assert first is not None
    # only this process wedges: its restart comes up healthy
    control.write_text(json.dumps({"pid": first, "wedged": True}))
    wait_for(lambda: run.count("ready") == 2, "readiness after the restart")
    wait_for(lambda: after(run, "restarting", "deep-ok"), "a good deep probe of the new server")
    kinds = run.kinds()
    assert kinds.index("deep-failed") < kinds.index("wedged") < kinds.index("restarting")
    wedged = next(e for e in run.supervisor.events if e.kind == "wedged")
    assert wedged.detail["counters"] == "frozen" and wedged.detail["pid"] == first
    assert wedged.detail["failing_for_s"] >= policy.hang_after
    assert run.supervisor.restarts == 1 and "unresponsive" not in kinds
    assert not alive(first)


def test_a_router_is_supervised_through_its_own_endpoints(start: Callable[..., Running]) -> None:
    run = start("--router", policy=replace(FAST, deep_interval=0.05), kind="router")
    wait_for(lambda: run.count("ready") == 1, "router readiness")
    ready = next(e for e in run.supervisor.events if e.kind == "ready")
    assert ready.detail["readiness"] == "/readiness"
    assert ready.detail["version"] == "0.0.0-fake-router"  # from /get_server_info
    pid = run.supervisor.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: run.count("ready") == 2, "router readiness after restart")
    # a router's /health_generate would only test some worker: no deep probe of its own
    assert not [k for k in run.kinds() if k.startswith("deep-")]
    assert "unresponsive" not in run.kinds()


def test_token_progress_prefers_the_per_iteration_counter() -> None:
    from solver.serve.metrics import parse_counters, token_progress

    page = (
        "# TYPE sglang:realtime_tokens_total counter\n"
        'sglang:realtime_tokens_total{mode="decode",tp_rank="0"} 70\n'
        'sglang:realtime_tokens_total{mode="prefill_compute",tp_rank="0"} 30\n'
        'sglang:generation_tokens_total{is_streaming="true"} 5\n'
    )
    assert token_progress(parse_counters(page)) == 100
    # an older server: only the per-finished-request counters
    assert token_progress(parse_counters('sglang:generation_tokens_total{a="b"} 5\n')) == 5
    assert token_progress(parse_counters("other_metric 1\n")) is None
    assert token_progress(None) is None
