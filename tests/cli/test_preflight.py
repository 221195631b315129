"""Issue 41, points 1 to 3: a wrong or down endpoint, a protocol mismatch, an unknown model
and a statement the context cannot hold each end before the run is made, in one line with
their exit code (3: nothing answers; 2: the configuration does not fit the server), and no
run directory is left behind. Against the real fake endpoint and real loopback servers."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from solver.testing import FakeEndpoint
from tests.hostile.helpers import Outcome, run_cli
from tests.loop import scripts
from tests.loop.harness import PROBLEM

HTML = b"<!DOCTYPE html><html><body><h1>It works!</h1></body></html>"


class _WebPage(BaseHTTPRequestHandler):
    """A plain web server: a page for every GET, 404 (a page too) for anything else."""

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _page(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(HTML)))
        self.end_headers()
        self.wfile.write(HTML)

    def do_GET(self) -> None:
        self._page(200)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._page(404)


@pytest.fixture
def web_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _WebPage)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def solve(tmp_path: Path, endpoint: str, *extra: str, statement: str = PROBLEM) -> Outcome:
    (tmp_path / "p.md").write_text(statement)
    config = tmp_path / "solver.toml"
    if not config.exists():
        config.write_text("[timeouts]\npreflight_s = 3\n")
    return run_cli(
        [
            "solve",
            str(tmp_path / "p.md"),
            "--config",
            str(config),
            "--endpoint",
            endpoint,
            "--runs-dir",
            str(tmp_path / "runs"),
            "--candidates",
            "1",
            *extra,
        ]
    )


def error_line(outcome: Outcome) -> str:
    (line,) = [x for x in outcome.stderr.splitlines() if x.startswith("error:")]
    return line


def no_run_left(tmp_path: Path) -> bool:
    runs = tmp_path / "runs"
    return not runs.exists() or not any(runs.iterdir())


def test_a_closed_port_is_exit_3_and_leaves_no_run(tmp_path: Path) -> None:
    outcome = solve(tmp_path, f"http://127.0.0.1:{closed_port()}/v1")
    assert outcome.code == 3, outcome.stderr
    assert "does not answer" in error_line(outcome)
    assert "start the model server" in error_line(outcome)
    assert "run:" not in outcome.stdout
    assert no_run_left(tmp_path)


def test_a_web_server_is_exit_2_and_leaves_no_run(tmp_path: Path, web_server: str) -> None:
    outcome = solve(tmp_path, web_server)
    assert outcome.code == 2, outcome.stderr
    assert "web page" in error_line(outcome)
    assert "check --endpoint" in error_line(outcome)
    assert no_run_left(tmp_path)


def test_the_wrong_protocol_is_named_with_the_one_to_use(tmp_path: Path) -> None:
    with FakeEndpoint(scripts.solved, apis=("chat",)) as fake:
        outcome = solve(tmp_path, fake.url + "/v1", "--api", "anthropic")
        sent = list(fake.requests)
    assert outcome.code == 2, outcome.stderr
    line = error_line(outcome)
    assert "does not serve Anthropic Messages" in line
    assert "use --api chat" in line
    assert sent == []  # no model call was made
    assert no_run_left(tmp_path)


def test_a_404_on_every_protocol_path_is_a_configuration_error(tmp_path: Path) -> None:
    with FakeEndpoint(scripts.solved, apis=()) as fake:
        outcome = solve(tmp_path, fake.url + "/v1")
    assert outcome.code == 2, outcome.stderr
    line = error_line(outcome)
    assert "answered HTTP 404" in line and "nor any other protocol" in line
    assert no_run_left(tmp_path)


def test_an_unknown_model_names_the_served_ones_and_the_closest(tmp_path: Path) -> None:
    with FakeEndpoint(scripts.solved, served_model="zai-org/GLM-5.2-FP8") as fake:
        outcome = solve(tmp_path, fake.url + "/v1", "--model", "zai-org/GLM-5.2")
        sent = list(fake.requests)
    assert outcome.code == 2, outcome.stderr
    line = error_line(outcome)
    assert "'zai-org/GLM-5.2' is not served" in line
    assert "did you mean 'zai-org/GLM-5.2-FP8'?" in line
    assert sent == []
    assert no_run_left(tmp_path)


def test_a_statement_longer_than_the_context_is_refused(tmp_path: Path) -> None:
    long_statement = "---\nid: long\n---\n" + "Prove that x > 0. " * 400
    with FakeEndpoint(scripts.solved, context_length=1024) as fake:
        outcome = solve(tmp_path, fake.url + "/v1", statement=long_statement)
        sent = list(fake.requests)
    assert outcome.code == 2, outcome.stderr
    line = error_line(outcome)
    assert "long: the statement does not fit the model" in line
    assert "context (the server's) is 1024" in line
    assert sent == []
    assert no_run_left(tmp_path)


def test_the_configured_context_length_serves_when_the_server_says_none(tmp_path: Path) -> None:
    (tmp_path / "solver.toml").write_text("context_length = 1024\n[timeouts]\npreflight_s = 3\n")
    long_statement = "---\nid: long\n---\n" + "Prove that x > 0. " * 400
    with FakeEndpoint(scripts.solved, context_length=None) as fake:
        outcome = solve(tmp_path, fake.url + "/v1", statement=long_statement)
    assert outcome.code == 2, outcome.stderr
    assert "context (context_length's) is 1024" in error_line(outcome)
    assert no_run_left(tmp_path)


def test_a_good_endpoint_passes_and_the_run_goes_on(tmp_path: Path) -> None:
    with FakeEndpoint(scripts.solved) as fake:
        outcome = solve(
            tmp_path, fake.url + "/v1", "--verifications", "1", "--accept", "1", "--json"
        )
    assert outcome.code == 0, outcome.stderr
    assert '"event": "run.created"' in outcome.stdout
    assert not no_run_left(tmp_path)


def test_preflight_0_lets_the_run_wait_for_the_endpoint(tmp_path: Path) -> None:
    """The opt-out for a server still loading: the run is made and waits (here not at all)."""
    (tmp_path / "solver.toml").write_text(
        "[timeouts]\npreflight_s = 0\n[retry]\nendpoint_wait_s = 0\n"
    )
    outcome = solve(tmp_path, f"http://127.0.0.1:{closed_port()}/v1")
    assert outcome.code == 3, outcome.stderr
    assert "did not answer for 0 s" in error_line(outcome)
    assert not no_run_left(tmp_path)  # the run is kept, resumable


def test_eval_checks_the_endpoint_before_its_runs(tmp_path: Path) -> None:
    problems = tmp_path / "set.jsonl"
    problems.write_text('{"id": "a", "problem": "Prove that 1 + 1 = 2."}\n')
    (tmp_path / "solver.toml").write_text("[timeouts]\npreflight_s = 3\n")
    outcome = run_cli(
        [
            "eval",
            str(problems),
            "--config",
            str(tmp_path / "solver.toml"),
            "--endpoint",
            f"http://127.0.0.1:{closed_port()}/v1",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert outcome.code == 3, outcome.stderr
    assert "does not answer" in error_line(outcome)
    assert not (tmp_path / "out").exists()


def test_eval_calibrate_checks_the_endpoint_before_its_runs(tmp_path: Path) -> None:
    graded = tmp_path / "graded.jsonl"
    graded.write_text(
        '{"id": "a", "problem": "Prove that 1 + 1 = 2.", "proof": "Count.", "human_grade": 7}\n'
    )
    (tmp_path / "solver.toml").write_text("[timeouts]\npreflight_s = 3\n")
    with FakeEndpoint(scripts.solved, apis=("chat",)) as fake:
        outcome = run_cli(
            [
                "eval",
                "calibrate",
                str(graded),
                "--config",
                str(tmp_path / "solver.toml"),
                "--endpoint",
                fake.url + "/v1",
                "--api",
                "responses",
                "--out",
                str(tmp_path / "out"),
            ]
        )
    assert outcome.code == 2, outcome.stderr
    assert "use --api chat" in error_line(outcome)
    assert not (tmp_path / "out").exists()
