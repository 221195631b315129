"""The policy lab: the simulated model answers from hidden proof states, the loop runs on it
unchanged (the audit passes), and the same seed gives the same decisions in process and over
real HTTP (the CI smoke test of ``bench/policy.py``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from solver.testing import LabModel, ProblemParams, RecordedRequest, RoleParams

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import policy  # noqa: E402  (bench/policy.py)

VERIFIER_SYSTEM = "You are a meticulous grader: find every error and every gap."
GENERATOR_SYSTEM = "You are an expert writing a solution to an olympiad problem."


def _request(system: str, user: str, max_tokens: int = 100_000) -> RecordedRequest:
    body = {
        "model": "m",
        "max_tokens": max_tokens,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }
    raw = json.dumps(body).encode()
    return RecordedRequest(api="chat", path="/v1/chat/completions", headers={}, body=raw, json=body)


def test_verifier_finds_visible_flaws_and_never_hidden_ones() -> None:
    always = ProblemParams("X", p_correct=0.0, p_critical=1.0, detect=1.0, p_hidden=0.0, fix=1.0)
    never = ProblemParams("Y", p_correct=0.0, p_critical=1.0, detect=1.0, p_hidden=1.0, fix=1.0)
    quiet = RoleParams(false_alarm=0.0, minor_rate=0.0, no_verdict=0.0)
    for params, expected in ((always, "fail"), (never, "pass")):
        lab = LabModel(params, quiet, seed=3)
        proof = lab(_request(GENERATOR_SYSTEM, "Problem.")).text
        verdict = lab(_request(VERIFIER_SYSTEM, f"# Proof\n\n{proof}")).text
        assert f'"verdict": "{expected}"' in verdict
        (state,) = lab.proofs.values()
        assert not state.correct and state.score < 7


def test_identical_requests_are_independent_samples_and_cut_at_max_tokens() -> None:
    lab = LabModel(policy.PROBLEMS[0], RoleParams(), seed=1)
    request = _request(GENERATOR_SYSTEM, "Problem.", max_tokens=100)
    first, second = lab(request), lab(request)
    assert first.text != second.text  # temperature > 0: the second draw is a new proof
    assert first.finish_reason == "length" and first.usage is not None
    assert first.usage[1] == 100
    assert "## Self-assessment" not in first.text  # cut mid-answer
    again = LabModel(policy.PROBLEMS[0], RoleParams(), seed=1)
    assert again(request).text == first.text  # and a seed replays exactly


@pytest.mark.parametrize("policy_name", ["default"])
def test_a_lab_session_audits_and_replays_over_http(tmp_path: Path, policy_name: str) -> None:
    chosen = next(p for p in policy.POLICIES if p.name == policy_name)
    params, roles, gpu = policy.PROBLEMS[0], RoleParams(), policy.GpuModel()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    seam = policy.run_session(tmp_path / "a", chosen, params, roles, gpu, 0, 600_000)
    wire = policy.run_session(tmp_path / "b", chosen, params, roles, gpu, 0, 600_000, http=True)
    assert seam.audit_ok and wire.audit_ok
    assert seam.decisions == wire.decisions
    assert (seam.decode, seam.prefill, seam.wall_s) == (wire.decode, wire.prefill, wire.wall_s)
    assert seam.calls > 5 and seam.wall_s > 0


def test_the_quick_setting_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    code = policy.main(["--quick", "--policies", "default", "--sessions-override", "1"])
    out = capsys.readouterr().out
    assert code == 0
    assert "strict /42" in out and "default" in out
