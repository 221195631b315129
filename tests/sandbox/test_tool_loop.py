"""The python tool in the loop, end to end: a verifier call that runs code in the sandbox,
gets its output back through the protocol's own tool calling, then writes its report; the
audit re-runs every execution and re-produces every later turn's request."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from solver.audit import audit_run
from solver.errors import SandboxUnavailable
from solver.loop.tools import ToolBox, result_content
from solver.records import ToolExecuted
from solver.report.load import load_report
from solver.report.markdown import render_markdown
from solver.sandbox import SandboxVersion
from solver.store import RunReader, canonical_json
from solver.testing import FakeEndpoint, RecordedRequest, role_of
from solver.testing.fake_endpoint import Reply
from tests.loop import scripts
from tests.loop.forge import rewrite
from tests.loop.harness import ScriptedEndpoint, resume, solve
from tests.sandbox.helpers import survivors

CHECK = "print(sum(i * i for i in range(10)))"  # 285


def tool_call(code: str, call_id: str = "call_1") -> tuple[str, str, str]:
    return (call_id, "python", json.dumps({"code": code}))


def verifier_with_python(request: RecordedRequest) -> Reply:
    """A verifier that checks a claim by computation before it reports; the others as in
    ``scripts.solved``."""
    if role_of(request) != "verifier":
        return scripts.solved(request)
    assert request.offered_tools == ["python"]
    results = request.tool_results
    if not results:
        return Reply(
            text="Let me compute.", tool_calls=[tool_call(CHECK)], finish_reason="tool_calls"
        )
    shown = json.loads(results[-1])
    assert shown["stdout"] == "285\n" and shown["exit"] == 0
    return scripts.verdict([])


def tool_records(run_dir: Path) -> list[ToolExecuted]:
    return [
        ToolExecuted.model_validate(r.data)
        for r in RunReader(run_dir).records()
        if r.type == "tool.executed"
    ]


def checks(run_dir: Path) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for check in audit_run(run_dir).checks:
        found.setdefault(check.name, []).append(check)
    return found


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_a_verifier_computes_then_reports_over_each_protocol(
    sandbox_ready: SandboxVersion, tmp_path: Path, api: str
) -> None:
    with FakeEndpoint(verifier_with_python) as fake:
        outcome = solve(fake, tmp_path, api=api, candidates=1, roles__verifier__tools=["python"])
    assert outcome.outcome == "solved"
    executed = tool_records(outcome.run_dir)
    assert executed and all(r.status == "ran" and r.exit == 0 for r in executed)
    assert all(r.sandbox == sandbox_ready.as_dict() for r in executed)
    # the generator was offered nothing; each verifier call asked twice, once with the result
    generator = [r for r in fake.requests if role_of(r) == "generator"]
    assert generator and all(r.offered_tools == [] for r in generator)
    with_results = [r for r in fake.requests if r.tool_results]
    assert len(with_results) == len(executed)
    manifest = json.loads((outcome.run_dir / "MANIFEST.json").read_text())
    assert manifest["roles"]["tools"] == ["python"]
    assert "verifier" in manifest["roles"]["role_tools"]
    found = checks(outcome.run_dir)
    assert all(c.status == "pass" for rows in found.values() for c in rows), found
    assert f"{len(executed)} tool executions re-run" in found["tools"][0].detail
    report = load_report(outcome.run_dir)
    assert report.tools.startswith("verifier: python") and f"({len(executed)} tool" in report.tools
    assert "| tools | verifier: python" in render_markdown(report)


def test_the_tool_call_limit_makes_the_model_answer(
    sandbox_ready: SandboxVersion, tmp_path: Path
) -> None:
    def greedy(request: RecordedRequest) -> Reply:
        if role_of(request) != "verifier":
            return scripts.solved(request)
        if request.tool_choice == "none":
            return scripts.verdict([])
        calls = [tool_call("print(1)", "a"), tool_call("print(2)", "b")]
        return Reply(text="", tool_calls=calls, finish_reason="tool_calls")

    with ScriptedEndpoint(greedy) as fake:
        outcome = solve(
            fake,
            tmp_path,
            candidates=1,
            roles__verifier__tools=["python"],
            roles__verifier__max_tool_calls=1,
        )
    assert outcome.outcome == "solved"
    executed = tool_records(outcome.run_dir)
    by_call: dict[str, list[ToolExecuted]] = {}
    for record in executed:
        by_call.setdefault(record.call_id, []).append(record)
    for records in by_call.values():
        assert [r.status for r in records] == ["ran", "refused"]
        assert records[1].code is None and records[1].is_error
    assert all(c.status == "pass" for c in audit_run(outcome.run_dir).checks)


def test_a_tampered_execution_output_fails_the_audit(
    sandbox_ready: SandboxVersion, tmp_path: Path
) -> None:
    with ScriptedEndpoint(verifier_with_python) as fake:
        outcome = solve(fake, tmp_path, candidates=1, roles__verifier__tools=["python"])
    forged_result = json.loads(
        RunReader(outcome.run_dir).read_blob(tool_records(outcome.run_dir)[0].result.blob)  # type: ignore[union-attr]
    )
    forged_result["stdout"] = "286\n"
    forged = canonical_json(forged_result)
    content = result_content(forged_result).encode()

    def edit(store: Any, type_: str, data: dict[str, Any]) -> dict[str, Any]:
        if type_ == "tool.executed" and data["index"] == 0:
            data["result"] = {"blob": store.put_blob(forged).digest, "bytes": len(forged)}
            data["content"] = {"blob": store.put_blob(content).digest, "bytes": len(content)}
        return data

    tampered = rewrite(outcome.run_dir, tmp_path / "tampered", edit)
    found = checks(tampered)
    failing = [c for c in found["tools"] if c.status == "fail"]
    assert failing and "another output than recorded" in failing[0].detail
    assert not audit_run(tampered).ok


def test_tool_code_not_written_by_the_model_fails_isolation(
    sandbox_ready: SandboxVersion, tmp_path: Path
) -> None:
    with ScriptedEndpoint(verifier_with_python) as fake:
        outcome = solve(fake, tmp_path, candidates=1, roles__verifier__tools=["python"])
    other = b"print(open('/sandbox/main.py').read())"

    def edit(store: Any, type_: str, data: dict[str, Any]) -> dict[str, Any]:
        if type_ == "tool.executed":
            data["code"] = {"blob": store.put_blob(other).digest, "bytes": len(other)}
        return data

    tampered = rewrite(outcome.run_dir, tmp_path / "tampered", edit)
    isolation = [c for c in checks(tampered)["isolation"] if c.status == "fail"]
    assert isolation and "ran other code than the model wrote" in isolation[0].detail


def test_without_the_sandbox_a_solve_with_tools_stops_before_the_first_call(
    tmp_path: Path,
) -> None:
    with ScriptedEndpoint(verifier_with_python) as fake:
        with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
            solve(
                fake,
                tmp_path,
                roles__verifier__tools=["python"],
                sandbox__bwrap="/nonexistent/bwrap",
            )
        assert fake.requests == []
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_run_killed_mid_exchange_resumes_from_the_journal(
    sandbox_ready: SandboxVersion, tmp_path: Path
) -> None:
    with FakeEndpoint(verifier_with_python) as fake:
        outcome = solve(fake, tmp_path, candidates=1, roles__verifier__tools=["python"])
        first = tool_records(outcome.run_dir)[0]
        cut = {"seen": False}

        def until_first_tool(store: Any, type_: str, data: dict[str, Any]) -> dict[str, Any] | None:
            # the journal as a kill right after the first tool execution leaves it
            if cut["seen"]:
                return None
            if type_ == "tool.executed" and data["call_id"] == first.call_id:
                cut["seen"] = True
            return data

        killed = rewrite(outcome.run_dir, tmp_path / "killed", until_first_tool)
        asked_before = len(fake.requests)
        resumed = resume(killed, tmp_path)
        assert resumed.outcome == "solved"
        # the exchange went on: the tool's recorded result was sent, not run again
        again = fake.requests[asked_before:]
        assert any(r.tool_results for r in again)
    executed = [r for r in tool_records(killed) if r.call_id == first.call_id]
    assert len(executed) == 1
    # (the forged cut leaves the cut records' blobs unnamed: a warning of the store's)
    report = audit_run(killed)
    assert report.ok, [c for c in report.checks if c.status == "fail"]
    assert {c.status for c in report.checks if c.name == "tools"} == {"pass"}


def test_an_auditor_without_the_sandbox_warns_and_does_not_fail(
    sandbox_ready: SandboxVersion, tmp_path: Path
) -> None:
    with ScriptedEndpoint(verifier_with_python) as fake:
        outcome = solve(fake, tmp_path, candidates=1, roles__verifier__tools=["python"])

    def elsewhere(manifest: dict[str, Any]) -> dict[str, Any]:
        # the run's sandbox, as the auditing machine would not have it
        manifest["config"]["resolved"]["sandbox"]["bwrap"] = "/nonexistent/bwrap"
        return manifest

    moved = rewrite(outcome.run_dir, tmp_path / "moved", lambda store, t, d: d, elsewhere)
    rows = checks(moved)["tools"]
    assert [r.status for r in rows] == ["warn"] and "not re-run" in rows[0].detail
    assert audit_run(moved).ok


def test_a_cancelled_call_kills_its_running_tool(sandbox_ready: SandboxVersion) -> None:
    marker = f"cancelled{uuid.uuid4().hex[:12]}"
    code = f'import os\nos.execv("/usr/bin/sleep", [{marker!r}, "3600"])\n'
    box = ToolBox(role_tools={"verifier": ("python",)}, max_calls={"verifier": 8})

    async def cancel_midway() -> float:
        task = asyncio.ensure_future(box.run("python", json.dumps({"code": code}), ("python",)))
        deadline = time.monotonic() + 10
        while not survivors(marker) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert survivors(marker), "the tool never started"
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - started

    took = asyncio.run(cancel_midway())
    assert took < 5  # killed at once, not at the 20 s wall limit
    deadline = time.monotonic() + 5
    while survivors(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert survivors(marker) == []
