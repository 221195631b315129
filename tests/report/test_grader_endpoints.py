"""Graders of another model family: on an endpoint of their own, with its own protocol, model,
key variable and sampling; the run names both endpoints, allow-lists both and audits clean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from solver.audit import audit_run
from solver.cli.eval import eval_group
from solver.config import resolve_settings
from solver.errors import InputError
from solver.run import read_manifest, role_endpoints, settings_of_run
from solver.store import RunReader, RunStore
from solver.testing import FakeEndpoint, RecordedRequest
from solver.testing.fake_endpoint import Reply
from tests.evaluation.test_eval import eval_args, write_set
from tests.loop.forge import failing, rewrite
from tests.loop.scripts import json_reply, role_of
from tests.report.responders import olympiad

GRADING_ROLES = ("grader", "evaluation", "rejudge", "rubric_writer")
SET = [
    {"id": "P1", "statement": "Prove the claim.", "reference_solution": "Work modulo 4."},
]


def family_a(request: RecordedRequest) -> Reply:
    """The generator's family: it is never asked to grade."""
    if role_of(request) in GRADING_ROLES:
        raise AssertionError(f"family A was asked to {role_of(request)}")
    return olympiad(request)


def family_b(request: RecordedRequest) -> Reply:
    """The graders' family: grades 6 (7 in the loop), and never solves."""
    role = role_of(request)
    if role not in GRADING_ROLES:
        raise AssertionError(f"family B was asked to {role}")
    if role == "evaluation":
        return json_reply("Assessment.", {"score": 6, "justification": "family B"})
    return olympiad(request)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RecordedRequest]]:
    tmp = tmp_path_factory.mktemp("families")
    set_path = write_set(tmp / "set.jsonl", SET)
    out = tmp / "eval"
    with FakeEndpoint(family_a) as a, FakeEndpoint(family_b, served_model="judge-b") as b:
        config = tmp / "solver.toml"
        config.write_text(
            "[roles.grader]\n"
            f'endpoint = "{b.url}"\n'
            'api = "anthropic"\n'
            'model = "judge-b"\n'
            'api_key_env = "GRADER_B_KEY"\n'
            "temperature = 0.3\n",
            encoding="utf-8",
        )
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("GRADER_B_KEY", "sk-family-b-secret")
            args = eval_args(set_path, out, a.url, "--config", str(config))
            result = CliRunner().invoke(eval_group, args)
        assert result.exit_code == 0, result.output
        assert not a.errors and not b.errors
        b_requests = list(b.requests)
    return out / "P1" / "run-1", b_requests


def test_graders_ran_on_their_own_endpoint(
    evaluated: tuple[Path, list[RecordedRequest]],
) -> None:
    run_dir, b_requests = evaluated
    calls = [r for r in b_requests if r.path.endswith("/messages")]
    assert {role_of(r) for r in calls} == {"grader", "evaluation", "rubric_writer"}
    assert {r.model for r in calls} == {"judge-b"}
    assert all(r.headers.get("x-api-key") == "sk-family-b-secret" for r in calls)
    assert {r.json.get("temperature") for r in calls} == {0.3}
    result = json.loads((run_dir / "final" / "result.json").read_text())
    assert result["evaluation"]["scores"] == [6, 6, 6] and result["evaluation_score"] == 6


def test_the_run_records_both_endpoints_and_audits_clean(
    evaluated: tuple[Path, list[RecordedRequest]],
) -> None:
    run_dir, _ = evaluated
    manifest = json.loads((run_dir / "MANIFEST.json").read_text())
    routed = manifest["role_endpoints"]
    assert set(routed) == {
        "grader",
        "grader:evaluation",
        "grader:rejudge",
        "grader:reconcile",
        "rubric_writer",
    }
    assert {e["api"] for e in routed.values()} == {"anthropic"}
    assert len(manifest["network"]["allow"]) == 2
    assert "sk-family-b-secret" not in (run_dir / "MANIFEST.json").read_text()
    assert b"sk-family-b-secret" not in (run_dir / "journal.jsonl").read_bytes()
    report = audit_run(run_dir)
    assert report.ok, [c for c in report.checks if c.status == "fail"]
    network = [c for c in report.checks if c.name == "network"]
    assert network and all(c.status == "pass" for c in network)


def test_a_grader_connection_elsewhere_fails_the_audit(
    evaluated: tuple[Path, list[RecordedRequest]], tmp_path: Path
) -> None:
    run_dir, _ = evaluated
    manifest = json.loads((run_dir / "MANIFEST.json").read_text())
    solver_host = manifest["network"]["allow"][0]
    graders = set()

    def edit(store: RunStore, type_: str, data: dict[str, object]) -> dict[str, object] | None:
        if type_ == "call.planned" and data["role"] == "grader:evaluation":
            graders.add(data["call_id"])
        if type_ == "net.connect" and data.get("call_id") in graders:
            data["address"] = solver_host  # as if it had been graded by the generator's family
        return data

    found = failing(rewrite(run_dir, tmp_path / "moved", edit), "network")
    assert any("grader:evaluation call connected to" in f for f in found), found


def test_a_resume_routes_the_graders_to_the_same_endpoint(
    evaluated: tuple[Path, list[RecordedRequest]],
) -> None:
    run_dir, _ = evaluated
    manifest = read_manifest(RunReader(run_dir).manifest, run_dir)
    settings = settings_of_run(manifest, resolve_settings(flags={}, env={}, cwd=run_dir))
    routed = role_endpoints(settings, env={"GRADER_B_KEY": "sk-today"})
    grader = routed["grader:evaluation"]
    assert (grader.api, grader.model, grader.api_key) == ("anthropic", "judge-b", "sk-today")
    assert manifest.role_endpoints is not None
    assert manifest.role_endpoints["grader:evaluation"].url == grader.base_url
    assert "verifier" not in routed and "generator" not in routed
    with pytest.raises(InputError, match=r"roles\.grader\.api_key_env names GRADER_B_KEY"):
        role_endpoints(settings, env={})
