"""End to end on the real embedded model: llama-server with SmolLM2-135M on the CPU.

A 135M model cannot prove anything; these tests check that a whole run on a real server ends
in an honest outcome, records the embedded model with its GGUF digest, audits clean, and
resumes after a kill."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest

from solver.endpoint_file import EndpointDescriptor, write_descriptor
from tests.local_server import LocalModel
from tests.loop.harness import audit_ok, state_of, write_problem
from tests.loop.subproc import json_lines, run, spawn

# A real model on two shared cores: allow far more than the default per-test timeout.
pytestmark = [pytest.mark.local_model, pytest.mark.timeout(1200)]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def workdir(
    tmp_path: Path, local_model_server: LocalModel, monkeypatch: pytest.MonkeyPatch
) -> Path:
    monkeypatch.setenv("SOLVER_ENDPOINT_FILE", str(tmp_path / "endpoint.json"))
    write_descriptor(
        EndpointDescriptor(
            base_url=local_model_server.base_url,
            model=local_model_server.model,
            source="local",
            pid=local_model_server.pid,
            context_length=local_model_server.context_length,
            gguf_sha256=local_model_server.gguf_sha256,
        )
    )
    config = (EXAMPLES / "demo.toml").read_text()
    # The 135M model's replies run to any limit, so every call is cut at its max_tokens (with
    # 384 tokens as with 160, the run is two cut-off generations and an honest "unsolved"):
    # short limits keep that whole run, a real server's cut replies and the audit of them, to
    # seconds on one CPU thread.
    config = re.sub(
        r"max_tokens = \d+", "max_tokens = 160", config.replace("calls = 10", "calls = 4")
    )
    (tmp_path / "solver.toml").write_text(config)
    write_problem(tmp_path)
    return tmp_path


def _env_run(args: list[str], workdir: Path) -> tuple[int, str, str]:
    done = run(args, workdir, timeout=1100)
    return done.returncode, done.stdout, done.stderr


def test_solve_on_the_local_model_is_honest_and_audits(
    workdir: Path, local_model_server: LocalModel
) -> None:
    code, out, err = _env_run(["solve", "odd.md", "--run-dir", "run", "--json"], workdir)
    assert code == 0, err[-3000:]
    final = json_lines(out)[-1]
    # A 135M model proves nothing: "solved" would mean the acceptance rule let it through.
    assert final["outcome"] in ("unsolved", "partial")
    assert final["calls"]["total"] >= 2
    run_dir = workdir / "run"
    state = state_of(run_dir)
    for call in state.calls.values():
        if call.phase == "grade" and (call.truncated or not call.parsed_ok):
            # a cut-off grader's facts say why they were not used; they hold no score
            assert getattr(call.facts, "score", None) is None, call.call_id
    if final["selected"] is not None:
        grade = state.calls.get(
            f"grade.{final['selected']['lineage']}.v{final['selected']['version']}"
        )
        if grade is None or grade.truncated or not grade.parsed_ok:
            assert final["score"] is None  # ungraded, never a grade from a cut-off grader
    manifest = json.loads((run_dir / "MANIFEST.json").read_text())
    assert manifest["endpoint"]["source"] == "local"
    assert manifest["endpoint"]["gguf_sha256"] == local_model_server.gguf_sha256
    audit_ok(run_dir)


def test_resume_on_the_local_model_after_a_kill(workdir: Path) -> None:
    proc = spawn(["solve", "odd.md", "--run-dir", "run", "--json"], workdir)
    assert proc.stdout is not None
    for line in proc.stdout:
        if '"call.finished"' in line:
            break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    code, out, err = _env_run(["resume", "run", "--json"], workdir)
    assert code == 0, err[-3000:]
    assert json_lines(out)[-1]["sessions"] == 2
    audit_ok(workdir / "run")
