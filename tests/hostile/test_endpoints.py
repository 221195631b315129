"""Issue 15, findings 1, 2, 3 and 11 end to end against the fake endpoint: credentials in the
endpoint URL are used and never stored; resume sends nothing before it has checked the run
and sends the key only where this session says; a moved server is followed only when named
(`resume --endpoint`), recorded for that session and held to it by the audit; an echoed
fragment of the key is stored nowhere; an endpoint URL with a query string works."""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from solver.audit import audit_run
from solver.store import RunReader
from solver.testing import FakeEndpoint
from solver.testing.fake_endpoint import Fault, Reply
from tests.hostile.helpers import run_cli
from tests.loop import scripts
from tests.loop.forge import failing, rewrite
from tests.loop.harness import PROBLEM, solve

KEY = "sk-hostile-4b7c1e9a0d3f5e2a"
PASSWORD = "pw-9f8e7d6c5b"
TOKEN = "tok-1a2b3c4d5e"


class Sentinel:
    """A loopback listener that only counts who connects: the host a key must never reach."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.connections = 0
        self.received = b""
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.1)
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            conn.settimeout(0.5)
            with contextlib.suppress(OSError):
                self.received += conn.recv(65536)
            conn.close()

    def close(self) -> None:
        self._stop = True
        self._thread.join(timeout=2)
        self.sock.close()


@pytest.fixture
def sentinel() -> Iterator[Sentinel]:
    listener = Sentinel()
    yield listener
    listener.close()


def every_byte(run_dir: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file())


def interrupted_run(tmp_path: Path) -> Path:
    """A run whose endpoint was down from the start: created, resumable, nothing solved."""
    (tmp_path / "p.md").write_text(PROBLEM)
    config = tmp_path / "solver.toml"
    # no preflight: the run is made, and finds the endpoint down
    config.write_text(
        f'runs_dir = "{tmp_path / "runs"}"\n[retry]\nendpoint_wait_s = 0\n'
        "[timeouts]\npreflight_s = 0\n"
    )
    outcome = run_cli(
        [
            "solve",
            str(tmp_path / "p.md"),
            "--config",
            str(config),
            "--endpoint",
            "http://127.0.0.1:9/v1",
            "--candidates",
            "1",
            "--verifications",
            "1",
            "--accept",
            "1",
        ]
    )
    assert outcome.code == 3, outcome.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    return run_dir


def test_url_credentials_are_used_but_never_stored(tmp_path: Path) -> None:
    with FakeEndpoint(scripts.solved) as fake:
        url = f"http://user:{PASSWORD}@127.0.0.1:{fake.port}/v1?token={TOKEN}"
        outcome = solve(fake, tmp_path, candidates=1, endpoint=url, api_key=KEY)
        sent = [r.headers.get("authorization", "") for r in fake.requests]
    assert outcome.outcome == "solved"
    # the URL's user info is what authenticates (httpx sends it as Basic auth)
    basic = "Basic " + base64.b64encode(f"user:{PASSWORD}".encode()).decode()
    assert sent and all(h == basic for h in sent)
    stored = every_byte(outcome.run_dir)
    for secret in (PASSWORD, TOKEN, KEY):
        assert secret.encode() not in stored, secret
    manifest = RunReader(outcome.run_dir).manifest
    assert manifest["endpoint"]["url"] == f"http://***@127.0.0.1:{fake.port}/v1?token=***"
    assert audit_run(outcome.run_dir).ok
    shown = run_cli(["report", str(outcome.run_dir), "--json"]).stdout
    assert PASSWORD not in shown and TOKEN not in shown


def test_the_audit_fails_a_run_holding_an_unmasked_credential(tmp_path: Path) -> None:
    with FakeEndpoint(scripts.solved) as fake:
        outcome = solve(fake, tmp_path, candidates=1)

    def leak(store: object, kind: str, data: dict[str, object]) -> dict[str, object]:
        if kind == "session.started":
            data["argv"] = ["solve", "--endpoint", f"http://u:{PASSWORD}@127.0.0.1:1/v1"]
        return data

    forged = rewrite(outcome.run_dir, tmp_path / "forged", leak)
    assert failing(forged, "credentials") == [
        "data.argv[2] holds user info in a URL, unmasked"
        f" @ {failing(forged, 'credentials')[0].split(' @ ')[1]}"
    ]
    assert not audit_run(forged).ok


def test_resume_refuses_a_configured_endpoint_other_than_the_runs(
    tmp_path: Path, sentinel: Sentinel
) -> None:
    run_dir = interrupted_run(tmp_path)
    outcome = run_cli(
        ["resume", str(run_dir)], env={"SOLVER_ENDPOINT": sentinel.url, "SOLVER_API_KEY": KEY}
    )
    assert outcome.code == 2
    assert "http://127.0.0.1:9/v1" in outcome.stderr and sentinel.url in outcome.stderr
    assert "--endpoint" in outcome.stderr
    assert sentinel.connections == 0


def test_resume_sends_no_key_to_an_endpoint_this_session_did_not_name(tmp_path: Path) -> None:
    run_dir = interrupted_run(tmp_path)
    outcome = run_cli(["resume", str(run_dir)], env={"SOLVER_API_KEY": KEY})
    assert outcome.code == 2 and "SOLVER_ENDPOINT" in outcome.stderr


def test_resume_checks_the_run_before_sending_anything(tmp_path: Path, sentinel: Sentinel) -> None:
    run_dir = interrupted_run(tmp_path)
    manifest = json.loads((run_dir / "MANIFEST.json").read_bytes())
    manifest["endpoint"]["url"] = sentinel.url  # the run now "belongs" to another host
    (run_dir / "MANIFEST.json").write_text(json.dumps(manifest, sort_keys=True))
    outcome = run_cli(["resume", str(run_dir)], env={"SOLVER_API_KEY": KEY})
    assert outcome.code == 65, outcome.stderr
    outcome = run_cli(["resume", str(run_dir)], env={"SOLVER_ENDPOINT": sentinel.url})
    assert outcome.code == 65, outcome.stderr
    assert sentinel.connections == 0


def test_a_moved_server_is_followed_when_named_and_held_to_it(tmp_path: Path) -> None:
    run_dir = interrupted_run(tmp_path)
    with FakeEndpoint(scripts.solved) as fake:
        moved = f"{fake.url}/v1"
        outcome = run_cli(
            ["resume", str(run_dir), "--endpoint", moved], env={"SOLVER_API_KEY": KEY}
        )
        sent = [r.headers.get("authorization", "") for r in fake.requests]
    assert outcome.code == 0, outcome.stderr
    assert sent and all(h == f"Bearer {KEY}" for h in sent)
    sessions = [r for r in RunReader(run_dir).records() if r.type == "session.started"]
    assert [s.data.get("endpoint") for s in sessions] == [None, moved]
    report = audit_run(run_dir)
    assert report.ok, [c for c in report.checks if c.status == "fail"]
    assert KEY.encode() not in every_byte(run_dir)

    def elsewhere(store: object, kind: str, data: dict[str, object]) -> dict[str, object]:
        if kind == "session.started" and data.get("endpoint"):
            data["endpoint"] = "http://127.0.0.1:1/v1"  # the session claims another server
        return data

    forged = rewrite(run_dir, tmp_path / "forged", elsewhere)
    assert any("not the allow-listed endpoint" in row for row in failing(forged, "network"))


def test_resume_refuses_a_bad_moved_endpoint_at_once(tmp_path: Path) -> None:
    run_dir = interrupted_run(tmp_path)
    for url in ("ftp://127.0.0.1/v1", "http://[::1"):
        outcome = run_cli(["resume", str(run_dir), "--endpoint", url])
        assert outcome.code == 2 and "--endpoint" in outcome.stderr


def test_an_echoed_key_fragment_is_stored_and_shown_nowhere(tmp_path: Path) -> None:
    for number, echoed in enumerate((KEY[:-3], KEY[6:20])):
        base = tmp_path / str(number)
        base.mkdir()
        refused = Reply(fault=Fault(status=401, message=f"invalid api key {echoed}"))
        with FakeEndpoint([refused] * 20) as fake:
            try:
                run_dir = solve(fake, base, candidates=1, api_key=KEY).run_dir
            except Exception:
                (run_dir,) = (base / "runs").iterdir()
        stored = every_byte(run_dir)
        assert echoed.encode() not in stored
        for flags in ([], ["--json"]):
            shown = run_cli(["report", str(run_dir), *flags])
            assert echoed not in shown.stdout and echoed not in shown.stderr


def test_an_endpoint_with_a_query_string_is_reached(tmp_path: Path) -> None:
    with FakeEndpoint(scripts.solved) as fake:
        outcome = solve(fake, tmp_path, candidates=1, endpoint=f"{fake.url}/v1?x=1")
        paths = {r.path for r in fake.requests}
    assert outcome.outcome == "solved"
    assert paths == {"/v1/chat/completions"}
