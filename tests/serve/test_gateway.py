"""The real gateway (smg 1.13.0) on 127.0.0.1 in front of SGLang worker stand-ins, each its own
process: `solver solve` and `solver eval` through it as a user runs them, one worker killed in
the middle of a run, the canary and the probe reading the workers behind it.

Streams are short (a few hundred characters at 16 a chunk) so each test takes seconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from solver.errors import EXIT_INTERRUPTED
from solver.llm import Endpoint, ModelClient
from solver.llm.gateway import gateway_workers_facts, routed_worker
from solver.serve.canary import _server_facts
from solver.testing import FakeEndpoint, RecordedRequest
from solver.testing.fake_wire import Reply
from solver.testing.gateway import Gateway, read_ledger, reissued
from tests.loop.harness import audit_ok, write_problem
from tests.loop.subproc import json_lines, run, solve_args, spawn
from tests.wire.catalogue import ALL_CASES, Case

pytestmark = pytest.mark.timeout(180)


def records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]


def gateway_port(gateway: Gateway) -> int:
    return int(gateway.url.rsplit(":", 1)[1])


def assert_only_the_gateway_was_dialled(run_dir: Path, gateway: Gateway) -> None:
    connects = [r["data"] for r in records(run_dir) if r["type"] == "net.connect"]
    assert connects
    assert {(c["host"], c["port"]) for c in connects} == {("127.0.0.1", gateway_port(gateway))}
    assert {c["address"] for c in connects} == {f"127.0.0.1:{gateway_port(gateway)}"}


def wait_for(condition: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.005)
    raise AssertionError(f"waited {seconds} s for {what}")


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    # 10 ms a chunk: a verifier's stream lasts about a quarter second, long enough to be cut
    with Gateway(tmp_path / "gateway", workers=3, chunk_delay=0.01) as gw:
        yield gw


def test_a_solve_through_smg_finishes_when_a_worker_dies_mid_run(
    tmp_path: Path, gateway: Gateway
) -> None:
    problem = write_problem(tmp_path)
    run_dir = tmp_path / "run"
    args = solve_args(gateway.url, problem, run_dir, "--candidates", "3")
    victim = gateway.pool[0]

    def answered_one_and_streams_another() -> bool:
        entries = victim.entries()
        ends = [e for e in entries if e["event"] == "end"]
        starts = [e for e in entries if e["event"] == "start"]
        return any(e["completed"] for e in ends) and len(starts) > len(ends)

    child = spawn(args, tmp_path)
    try:
        wait_for(answered_one_and_streams_another, 60, "the victim to stream its second answer")
        gateway.kill_worker(0)
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0, err[-2000:]
    events = json_lines(out)
    assert events[-1]["event"] == "run.finished"
    audit_ok(run_dir)
    assert_only_the_gateway_was_dialled(run_dir, gateway)

    # the victim's streams that were cut: each failed at the client, named with its worker
    entries = victim.entries()
    ended = {e["request_id"] for e in entries if e["event"] == "end"}
    cut = {e["request_id"] for e in entries if e["event"] == "start"} - ended
    assert cut, "the kill cut no stream"
    started = {
        r["data"]["request_id"]: r["data"] for r in records(run_dir) if r["type"] == "llm.started"
    }
    cut_calls = {started[rid]["call_id"] for rid in cut}
    failed = [e for e in events if e["event"] == "call.retrying"]
    assert {e["call"] for e in failed} >= cut_calls
    assert {e["worker"] for e in failed if e["call"] in cut_calls} == {victim.url}
    assert all(e["error_kind"] == "server_error" for e in failed)
    # smg turns the cut into an in-band error event and a clean end, which the client refuses
    assert all("Stream error" in e["error"] for e in failed)

    # nothing a worker had sent whole was asked again, at the workers or by the run
    ledgers = [w.ledger for w in gateway.pool]
    assert reissued([run_dir / "journal.jsonl"], ledgers) == 0
    done_at_workers = {
        e["request_id"]
        for w in gateway.pool
        for e in w.entries()
        if e["event"] == "end" and e["completed"]
    }
    completed_rids = {
        started_rid
        for r in records(run_dir)
        if r["type"] == "llm.completed"
        for started_rid, data in started.items()
        if data["call_id"] == r["data"]["call_id"] and data["attempt"] == r["data"]["attempt"]
    }
    assert completed_rids <= done_at_workers  # every answer the run kept was a worker's whole one
    # after the kill the survivors served the rest
    assert sorted(gateway.healthy_workers()) == sorted(w.url for w in gateway.pool[1:])
    assert any(e["worker"] == victim.url for e in failed)
    telemetry = [r["data"]["telemetry"] for r in records(run_dir) if r["type"] == "llm.completed"]
    assert {t["routed_worker"] for t in telemetry} <= {w.url for w in gateway.pool}


@pytest.fixture
def slow_gateway(tmp_path: Path) -> Iterator[Gateway]:
    # 40 ms a chunk: a stream lasts about a second, so an interrupt lands inside one
    with Gateway(tmp_path / "gateway", workers=2, chunk_delay=0.04) as gw:
        yield gw


def test_ctrl_c_through_smg_cuts_the_streams_at_the_workers_and_resume_finishes(
    tmp_path: Path, slow_gateway: Gateway
) -> None:
    """Ctrl-C cancels the calls in flight: the gateway must pass the client's disconnect on,
    so the workers stop decoding them; `solver resume` then finishes through the gateway."""
    gateway = slow_gateway
    problem = write_problem(tmp_path)
    run_dir = tmp_path / "run"

    def ends() -> dict[str, bool]:
        return {
            e["request_id"]: e["completed"]
            for w in gateway.pool
            for e in read_ledger(w.ledger)
            if e["event"] == "end"
        }

    def started(within: float = 1e9) -> set[str]:
        now = time.time()
        return {
            e["request_id"]
            for w in gateway.pool
            for e in read_ledger(w.ledger)
            if e["event"] == "start" and now - e["t"] < within
        }

    def in_flight() -> set[str]:
        return started() - set(ends())

    def fresh_stream() -> bool:
        # a stream that began under 0.3 s ago: it has most of its second still to run
        return any(ends().values()) and bool(started(0.3) - set(ends()))

    child = spawn(solve_args(gateway.url, problem, run_dir, "--candidates", "2"), tmp_path)
    try:
        wait_for(fresh_stream, 60, "a stream in flight")
        os.killpg(child.pid, signal.SIGINT)
        child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == EXIT_INTERRUPTED
    journal = records(run_dir)
    rids = {r["data"]["request_id"] for r in journal if r["type"] == "llm.started"}
    kept = {r["data"]["call_id"] for r in journal if r["type"] == "llm.completed"}
    wait_for(lambda: not (in_flight() & rids), 10, "the workers to see the cut streams end")
    cut = {rid for rid, whole in ends().items() if not whole and rid in rids}
    assert cut, "no stream was in flight at the interrupt"

    again = run(["resume", str(run_dir), "--json"], tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    audit_ok(run_dir)
    assert_only_the_gateway_was_dialled(run_dir, gateway)
    assert reissued([run_dir / "journal.jsonl"], [w.ledger for w in gateway.pool]) == 0
    journal = records(run_dir)
    for call in kept:  # what was answered before the interrupt was not asked again
        assert (
            sum(r["type"] == "llm.started" and r["data"]["call_id"] == call for r in journal) == 1
        )


def test_an_eval_through_smg_scores_and_audits_every_run(tmp_path: Path, gateway: Gateway) -> None:
    problems = [
        {
            "id": "P1",
            "statement": "Prove that the sum of two odd squares is never a square.",
            "reference_solution": "Squares are 0 or 1 modulo 4.",
        },
        {
            "id": "P2",
            "statement": "HARD: prove that the sum of two odd squares is not a square.",
            "reference_solution": "Squares are 0 or 1 modulo 4.",
        },
    ]
    set_path = tmp_path / "set.jsonl"
    set_path.write_text("".join(json.dumps(p) + "\n" for p in problems))
    out = tmp_path / "eval"
    args = [
        "eval",
        str(set_path),
        "--out",
        str(out),
        "--endpoint",
        gateway.url + "/v1",
        "--candidates",
        "1",
        "--verifications",
        "1",
        "--accept",
        "1",
        "--graders",
        "2",
        "--concurrency-problems",
        "2",
    ]
    result = run(args, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads((out / "results.json").read_text())
    assert [r["grade"] for p in data["problems"] for r in p["runs"]] == [7, 2]
    for name in ("P1", "P2"):
        audit_ok(out / name / "run-1")
        assert_only_the_gateway_was_dialled(out / name / "run-1", gateway)
    served = {e["request_id"] for w in gateway.pool for e in w.entries() if e["event"] == "end"}
    assert len(served) == sum(
        1
        for name in ("P1", "P2")
        for r in records(out / name / "run-1")
        if r["type"] == "llm.started"
    )


def test_the_canary_and_the_probe_read_the_workers_behind_smg(gateway: Gateway) -> None:
    async def facts() -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=5) as client:
            return await _server_facts(client, gateway.url, ())

    seen = asyncio.run(facts())
    assert seen["router"] == gateway.url
    assert sorted(seen["workers"]) == sorted(w.url for w in gateway.pool)
    gateway.kill_worker(1)
    wait_for(lambda: len(gateway.healthy_workers()) == 2, 10, "smg to drop the dead worker")
    assert gateway.pool[1].url not in asyncio.run(facts())["workers"]

    # smg's models list says owned_by "self_hosted" and no context length; /workers has it
    endpoint = Endpoint(base_url=gateway.url + "/v1", api="chat", model="glm-fake")

    async def probe() -> Any:
        async with ModelClient(endpoint) as client:
            return await client.probe()

    info = asyncio.run(probe())
    assert info.models == ("glm-fake",)
    assert info.context_length == 131072


def test_gateway_worker_facts_and_routed_worker_are_read_defensively() -> None:
    listed = {
        "workers": [
            {
                "url": "http://a:1",
                "is_healthy": True,
                "runtime_type": "sglang",
                "models": [{"id": "glm", "context_length": 200000}],
            },
            {
                "url": "http://b:1",
                "is_healthy": True,
                "runtime_type": "sglang",
                "models": [
                    {"id": "glm", "context_length": 131072},
                    {"id": "other", "context_length": 9},
                ],
            },
            {
                "url": "http://c:1",
                "is_healthy": False,
                "runtime_type": "vllm",
                "models": [{"id": "glm", "context_length": 4}],
            },
        ]
    }
    raw = json.dumps(listed).encode()
    assert gateway_workers_facts(raw, ("glm",)) == (131072, "sglang")
    assert gateway_workers_facts(b"not json", ("glm",)) == (None, None)
    assert gateway_workers_facts(b'{"workers": 3}', ("glm",)) == (None, None)
    assert (
        routed_worker({"x-smg-routed-worker-id": "http://user:pw@w1:30000"})
        == "http://***@w1:30000"
    )
    assert routed_worker({"x-smg-routed-worker-id": "http://w1:1\x1b[2J" + "x" * 500}) is not None
    assert len(routed_worker({"x-smg-routed-worker-id": "h" * 5000}) or "") == 200
    assert routed_worker({}) is None


def test_reissued_counts_an_answer_asked_again(tmp_path: Path) -> None:
    ledger = tmp_path / "w.jsonl"
    ledger.write_text(
        "".join(
            json.dumps(e) + "\n"
            for e in [
                {"event": "end", "request_id": "r1", "completed": True},
                {"event": "end", "request_id": "r2", "completed": False},
                {"event": "end", "request_id": "r4", "completed": True},
                {"event": "end", "request_id": "r4", "completed": True},
            ]
        )
    )
    journal = tmp_path / "journal.jsonl"

    def started(call: str, attempt: int, rid: str) -> str:
        data = {"call_id": call, "attempt": attempt, "request_id": rid}
        return json.dumps({"type": "llm.started", "data": data}) + "\n"

    def completed(call: str, attempt: int) -> str:
        data = {"call_id": call, "attempt": attempt}
        return json.dumps({"type": "llm.completed", "data": data}) + "\n"

    # c1: received whole (r1), then asked again (r3); c2: cut (r2), retried (r5): fine
    journal.write_text(
        started("c1", 1, "r1")
        + completed("c1", 1)
        + started("c1", 2, "r3")
        + started("c2", 1, "r2")
        + started("c2", 2, "r5")
        + completed("c2", 2)
    )
    assert reissued([journal], [ledger]) == 2  # r3, and r4 answered twice
    journal.write_text(started("c2", 1, "r2") + started("c2", 2, "r5") + completed("c2", 2))
    ledger.write_text(json.dumps({"event": "end", "request_id": "r2", "completed": False}) + "\n")
    assert reissued([journal], [ledger]) == 0


CHAT_CASES = [case for case in ALL_CASES if case.api == "chat"]


@pytest.fixture(scope="module")
def raw_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """smg in front of one in-process fake that sends a catalogue case's exact bytes."""
    by_code = {case.code: case for case in CHAT_CASES}

    def replay(request: RecordedRequest) -> Reply:
        return Reply(raw_chunks=[by_code[request.user_text].raw])

    with FakeEndpoint(replay, owned_by="sglang") as fake:
        directory = tmp_path_factory.mktemp("raw-gateway")
        with Gateway(directory, external=(fake.url,), router_args=("--disable-retries",)) as gw:
            yield gw


@pytest.mark.parametrize("case", CHAT_CASES, ids=[case.code for case in CHAT_CASES])
def test_every_chat_stream_case_passes_through_smg_byte_for_byte(
    raw_gateway: Gateway, case: Case
) -> None:
    """The stream catalogue (docs/stream-cases.md: GLM's quirks, usage tails, in-band errors,
    malformed JSON, missing finishes): smg 1.13.0 changes none of their bytes, so the client
    decodes each exactly as it would from SGLang directly."""
    body = {
        "model": "glm-fake",
        "messages": [{"role": "user", "content": case.code}],
        "stream": True,
    }
    url = raw_gateway.url + "/v1/chat/completions"
    with httpx.stream("POST", url, json=body, timeout=10) as response:
        got = b"".join(response.iter_raw())
        assert response.status_code == 200
        assert response.headers["x-smg-routed-worker-id"] == raw_gateway.external[0]
    assert got == case.raw
