"""The policy lab with the python tool (issue 43 point 6): the simulated verifier writes a real
check, the loop runs it in the sandbox, the verifier reads the result and reports the flaw the
check refuted; one whole lab session runs the tool through the loop, records each execution,
and its audit (which re-runs them) passes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from solver.errors import SandboxUnavailable
from solver.sandbox import sandbox_version
from solver.testing import LabModel, ProblemParams, RecordedRequest, RoleParams

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import policy  # noqa: E402  (bench/policy.py)

VERIFIER_SYSTEM = "You are a meticulous grader: find every error and every gap."
GENERATOR_SYSTEM = "You are an expert writing a solution to an olympiad problem."
PYTHON_TOOL = {"type": "function", "function": {"name": "python", "parameters": {}}}


def _request(
    system: str, user: str, extra: list[dict[str, object]] | None = None
) -> RecordedRequest:
    messages: list[dict[str, object]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": user},
        *(extra or []),
    ]
    body: dict[str, object] = {"model": "m", "max_tokens": 100_000, "messages": messages}
    if system == VERIFIER_SYSTEM:
        body["tools"] = [PYTHON_TOOL]
    raw = json.dumps(body).encode()
    return RecordedRequest(api="chat", path="/v1/chat/completions", headers={}, body=raw, json=body)


def test_a_check_refutes_a_hidden_flaw_and_the_verifier_reports_it() -> None:
    hidden = ProblemParams(
        "X", p_correct=0.0, p_critical=1.0, detect=1.0, p_hidden=1.0, fix=1.0, asks_answer=True
    )
    quiet = RoleParams(
        false_alarm=0.0, minor_rate=0.0, no_verdict=0.0, tool_check=1.0, tool_refute=1.0
    )
    lab = LabModel(hidden, quiet, seed=3)
    proof = lab(_request(GENERATOR_SYSTEM, "Problem.")).text
    user = f"# Proof\n\n{proof}"
    asked = lab(_request(VERIFIER_SYSTEM, user))
    assert asked.finish_reason == "tool_calls" and asked.usage is not None
    ((call_id, name, arguments),) = asked.tool_calls
    assert name == "python"
    code = json.loads(arguments)["code"]
    # the program is real: run it, as the sandbox would
    ran = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True
    )
    (state,) = lab.proofs.values()
    assert ran.stdout.split() == [w for f in state.flaws for w in ("REFUTED", f.key)]
    result = {"exit": 0, "killed_reason": None, "stderr": "", "stdout": ran.stdout}
    turn = [
        {
            "role": "assistant",
            "content": asked.text,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)},
    ]
    report = lab(_request(VERIFIER_SYSTEM, user, turn))
    assert '"verdict": "fail"' in report.text and report.cached_tokens > 0
    for flaw in state.flaws:
        assert f"contradicts step {flaw.key}" in report.text
    # without the tool the same verifier, blind to the flaw, passes the proof
    blind = LabModel(hidden, quiet, seed=3)
    blind(_request(GENERATOR_SYSTEM, "Problem."))
    plain = dict(_request(VERIFIER_SYSTEM, user).json)
    plain.pop("tools")
    raw = json.dumps(plain).encode()
    no_tool = RecordedRequest(
        api="chat", path="/v1/chat/completions", headers={}, body=raw, json=plain
    )
    assert '"verdict": "pass"' in blind(no_tool).text


def test_a_lab_session_runs_the_tool_through_the_loop_and_audits(tmp_path: Path) -> None:
    try:
        sandbox_version()
    except SandboxUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{exc}; CI installs it with `make sandbox`")
        pytest.skip(str(exc))
    tool = next(p for p in policy.POLICIES if p.name == "tool")
    roles = RoleParams(tool_check=1.0, tool_refute=1.0)
    session = policy.run_session(
        tmp_path, tool, policy.PROBLEMS[0], roles, policy.GpuModel(), 0, 300_000
    )
    assert session.audit_ok  # the audit re-ran every recorded execution
    assert session.tool_runs > 0 and session.tool_runs == session.checks
