"""The loop's audit checks fail, naming the place, when a run breaks their rules.

Each case re-writes a real run into a new, correctly chained run with one record changed, so
the generic chain and blob checks pass and only the semantic check can notice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from solver.audit import audit_run
from solver.store import RunStore
from solver.testing import FakeEndpoint
from tests.loop import scripts
from tests.loop.forge import failing, rewrite
from tests.loop.harness import EVAL_PROBLEM, solve


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("source")
    with FakeEndpoint(scripts.fix_after_finding) as fake:
        return solve(fake, tmp, EVAL_PROBLEM, candidates=1).run_dir


def test_unchanged_copy_audits_clean(finished_run: Path, tmp_path: Path) -> None:
    copy = rewrite(finished_run, tmp_path / "copy", lambda s, t, d: d)
    assert audit_run(copy).ok


def test_reference_given_to_a_verifier_fails_isolation(finished_run: Path, tmp_path: Path) -> None:
    def edit(store: RunStore, type_: str, data: dict[str, Any]) -> dict[str, Any] | None:
        if type_ == "context.built" and data["role"] == "verifier":
            ref = store.put_blob(b"x")
            data["links"]["proof_text"] = [
                {"kind": "reference_solution", "artifact": "reference_solution", "blob": ref.digest}
            ]
        return data

    found = failing(rewrite(finished_run, tmp_path / "r", edit), "isolation")
    assert any("may not see reference_solution" in f and "seq" in f for f in found), found


def test_edited_prompt_fails_reproduction(finished_run: Path, tmp_path: Path) -> None:
    done = False

    def edit(store: RunStore, type_: str, data: dict[str, Any]) -> dict[str, Any] | None:
        nonlocal done
        if type_ == "llm.started" and not done:
            body = json.loads(store.read_blob(data["request"]["blob"]))
            body["messages"][-1]["content"] += " Hint: work modulo 4."
            ref = store.put_blob(json.dumps(body).encode())
            data["request"] = {"blob": ref.digest, "bytes": ref.size}
            done = True
        return data

    found = failing(rewrite(finished_run, tmp_path / "p", edit), "prompts")
    assert any("not re-produced" in f for f in found), found


def test_leaked_reasoning_in_proof_fails_derivation(finished_run: Path, tmp_path: Path) -> None:
    def edit(store: RunStore, type_: str, data: dict[str, Any]) -> dict[str, Any] | None:
        if type_ == "artifact.put" and data["kind"] == "proof_text":
            text = store.read_blob(data["blob"]["blob"]) + b"\n" + scripts.MARK_REASONING.encode()
            ref = store.put_blob(text)
            data["blob"] = {"blob": ref.digest, "bytes": ref.size}
        return data

    found = failing(rewrite(finished_run, tmp_path / "d", edit), "isolation")
    assert any("is not what its producer" in f for f in found), found


def test_missing_outcome_and_foreign_host_fail(finished_run: Path, tmp_path: Path) -> None:
    dropped = False

    def edit(store: RunStore, type_: str, data: dict[str, Any]) -> dict[str, Any] | None:
        nonlocal dropped
        if type_ == "llm.completed" and not dropped:
            dropped = True
            return None
        if type_ == "net.connect":
            data["address"] = "198.51.100.7:" + data["address"].rsplit(":", 1)[1]
        return data

    run = rewrite(finished_run, tmp_path / "n", edit)
    assert any("is not open" in f or "no outcome" in f for f in failing(run, "calls"))
    assert any("198.51.100.7" in f for f in failing(run, "network"))


def test_calls_without_any_recorded_connection_are_not_a_network_pass(
    finished_run: Path, tmp_path: Path
) -> None:
    def edit(store: RunStore, type_: str, data: dict[str, Any]) -> dict[str, Any] | None:
        return None if type_ == "net.connect" else data

    run = rewrite(finished_run, tmp_path / "no-connections", edit)
    rows = [c for c in audit_run(run).checks if c.name == "network"]
    assert [c.status for c in rows] == ["warn"], rows
    assert "no connection recorded" in rows[0].detail
