"""Issue 41, points 1 to 3, inside a run: a server that refuses every call the same way ends
the session with the likely fix (exit 2, the run kept and resumable), never an
honest-looking "unsolved"; a retry in progress reaches the progress view and the JSON lines."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from solver.audit import audit_run
from solver.errors import EXIT_INPUT, EndpointRefuses
from solver.loop.engine import REFUSALS_IN_A_ROW, refusal_sign
from solver.run import read_state
from solver.store import RunReader
from solver.testing import FakeEndpoint, RecordedRequest, Responder, role_of
from solver.testing.fake_endpoint import Fault, Reply
from solver.wire import HTTPStatusError, IdleTimeout, StreamProtocolError
from tests.hostile.helpers import run_cli
from tests.loop import scripts
from tests.loop.harness import PROBLEM, solve


def refuses_generators(status: int) -> Responder:
    def respond(request: RecordedRequest) -> Reply:
        if role_of(request) == "generator":
            return Reply(fault=Fault(status=status, message="model 'glm' does not exist"))
        return scripts.solved(request)

    return respond


@pytest.mark.parametrize("status", [400, 404])
def test_calls_refused_alike_end_the_session_with_the_fix(tmp_path: Path, status: int) -> None:
    with FakeEndpoint(refuses_generators(status)) as fake:
        with pytest.raises(EndpointRefuses) as caught:
            solve(fake, tmp_path, candidates=2)
        sent = len(fake.requests)
    assert caught.value.exit_code == EXIT_INPUT
    message = str(caught.value)
    assert f"{REFUSALS_IN_A_ROW} calls in a row were refused the same way" in message
    assert f"HTTP {status}" in message and "solver resume" in message
    if status == 404:
        assert "check --api, --endpoint and --model" in message
    # not retried, and no search went on (one call may be in flight beside the third)
    assert REFUSALS_IN_A_ROW <= sent <= REFUSALS_IN_A_ROW + 1
    (run_dir,) = (tmp_path / "runs").iterdir()
    _, state = read_state(run_dir)
    assert state.phase == "solve" and state.outcome is None  # no "unsolved" was written
    assert not (run_dir / "final" / "result.json").exists()
    ended = [r for r in RunReader(run_dir).records() if r.type == "session.ended"]
    assert ended[-1].data["reason"] == "error"
    assert audit_run(run_dir).ok


def test_a_refusal_between_successes_does_not_end_the_run(tmp_path: Path) -> None:
    """One refused call, then calls that complete: the run goes on to its finish."""
    lock, refused = threading.Lock(), [0]

    def respond(request: RecordedRequest) -> Reply:
        if role_of(request) == "verifier":
            with lock:
                refused[0] += 1
                if refused[0] <= REFUSALS_IN_A_ROW - 1:
                    return Reply(fault=Fault(status=400, message="bad field"))
        return scripts.solved(request)

    with FakeEndpoint(respond) as fake:
        outcome = solve(fake, tmp_path, candidates=1)
    assert outcome.outcome == "solved"


def test_the_cli_says_so_in_one_line_and_exits_2(tmp_path: Path) -> None:
    (tmp_path / "p.md").write_text(PROBLEM)
    with FakeEndpoint(refuses_generators(404)) as fake:
        outcome = run_cli(
            [
                "solve",
                str(tmp_path / "p.md"),
                "--endpoint",
                fake.url + "/v1",
                "--runs-dir",
                str(tmp_path / "runs"),
                "--candidates",
                "3",
            ]
        )
    assert outcome.code == 2, outcome.stderr
    assert "calls in a row were refused the same way" in outcome.stderr
    assert "outcome:" not in outcome.stdout


def test_a_retry_is_a_json_event_of_the_run(tmp_path: Path) -> None:
    lock, failed = threading.Lock(), [False]

    def respond(request: RecordedRequest) -> Reply:
        with lock:
            if role_of(request) == "generator" and not failed[0]:
                failed[0] = True
                return Reply(fault=Fault(status=503, retry_after=0.1, message="loading"))
        return scripts.solved(request)

    (tmp_path / "p.md").write_text(PROBLEM)
    with FakeEndpoint(respond) as fake:
        outcome = run_cli(
            [
                "solve",
                str(tmp_path / "p.md"),
                "--endpoint",
                fake.url + "/v1",
                "--json",
                "--runs-dir",
                str(tmp_path / "runs"),
                "--candidates",
                "1",
                "--verifications",
                "1",
                "--accept",
                "1",
            ]
        )
    assert outcome.code == 0, outcome.stderr
    events = [json.loads(line) for line in outcome.stdout.splitlines()]
    (retry,) = [e for e in events if e["event"] == "call.retrying"]
    assert retry["role"] == "generator" and retry["candidate"] is not None
    assert (retry["failed_attempt"], retry["next_attempt"], retry["max_attempts"]) == (1, 2, 6)
    assert retry["wait_s"] == 0.1
    assert "HTTP 503" in retry["error"]
    assert events[-1]["event"] == "run.finished"


def test_a_statement_past_the_context_mid_run_stops_without_one_token_calls(
    tmp_path: Path,
) -> None:
    """Without the check before the run (a library caller, or preflight_s = 0), the client
    refuses each call whose prompt fills the context, and the session ends after three, with
    nothing sent: never a search of one-token answers."""
    statement = PROBLEM + "\n" + "Consider also x > 0. " * 300
    with FakeEndpoint(scripts.solved, context_length=1024) as fake:
        with pytest.raises(EndpointRefuses) as caught:
            solve(fake, tmp_path, statement, candidates=3)
        sent = [r for r in fake.requests if r.json.get("max_tokens") is not None]
    assert sent == []
    assert "the prompts do not fit the model's context" in str(caught.value)
    assert "ContextBelowFloor" not in str(caught.value)  # the message, not the class


def test_which_failures_count_as_refusals() -> None:
    def status(code: int, retryable: bool = False) -> HTTPStatusError:
        return HTTPStatusError(f"HTTP {code}", status=code, retryable=retryable)

    assert refusal_sign(status(404)) == "http 404"
    assert refusal_sign(status(400)) == "http 400"
    assert refusal_sign(status(429, retryable=True)) is None  # busy, not refused
    assert refusal_sign(status(503, retryable=True)) is None
    assert refusal_sign(StreamProtocolError("x", kind="malformed")) == "stream malformed"
    assert refusal_sign(StreamProtocolError("x", kind="connection_lost")) is None
    assert refusal_sign(IdleTimeout("slow")) is None
