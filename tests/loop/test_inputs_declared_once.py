"""What each role may see is stated once, in its ``Inputs``: the context builder fills a
call's fields as that declaration lists them, the isolation policy and the audit read the
same declaration, and a recorded run's contexts rebuild byte for byte from its journal."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from solver import roles
from solver.loop.contexts import DERIVED_SUFFIX, ContextBuilder
from solver.loop.state import RunState, reviews_of
from solver.problems import Problem
from solver.records import parse_loop_record
from solver.store import BlobRef, RunReader, RunStore
from solver.testing import FakeEndpoint
from tests.loop import scripts
from tests.loop.harness import EVAL_PROBLEM, solve

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "run-v1-signed"


def test_the_isolation_policy_is_the_inputs_declarations() -> None:
    for key in roles.POLICY_KEYS:
        declared = set(roles.get_role(key).inputs_model.KINDS.values())
        assert roles.ISOLATION_POLICY[key] == declared, key


def test_each_derived_input_is_declared_by_exactly_one_role() -> None:
    """The audit names the role a derived artifact feeds from the declarations alone."""
    for kind in DERIVED_SUFFIX:
        takers = [key for key, kinds in roles.ISOLATION_POLICY.items() if kind in kinds]
        assert len(takers) == 1, (kind, takers)


class _ReadOnlyStore:
    """Reads from the run; a "write" only names the bytes (as the audit's rebuild does)."""

    def __init__(self, reader: RunReader) -> None:
        self.reader = reader

    def read_blob(self, ref: str) -> bytes:
        return self.reader.read_blob(ref)

    def put_blob(self, data: bytes) -> BlobRef:
        return BlobRef(digest="sha256:" + hashlib.sha256(data).hexdigest(), size=len(data))


def rebuilt_contexts(run_dir: Path) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Each recorded context.built beside the one this builder makes at that point of the
    journal: (role, recorded record data, rebuilt {"inputs": digest, "links": ...})."""
    reader = RunReader(run_dir)
    resolved = reader.manifest["config"]["resolved"]
    state = RunState(reviews=reviews_of(resolved))
    problem = Problem.model_validate(reader.manifest["problem"]["record"])
    store: Any = _ReadOnlyStore(reader)
    builder = ContextBuilder(store, state, problem, seed=int(resolved["seed"]))
    found = []
    for rec in reader.records():
        if rec.type == "context.built":
            built = builder.build(state.calls[rec.data["call_id"]])
            rebuilt = {
                "inputs": "sha256:" + hashlib.sha256(built.inputs_json).hexdigest(),
                "links": {
                    name: [link.model_dump(mode="json") for link in links]
                    for name, links in built.links.items()
                },
            }
            found.append((str(rec.data["role"]), rec.data, rebuilt))
        typed = parse_loop_record(rec.type, rec.v, rec.data)
        if typed is not None:
            state.apply(typed, rec.t)
    return found


@pytest.fixture(scope="module")
def evaluated_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A revision after a confirmed finding, then evaluation grading with the organisers'
    material: generator, verifier, reviewer, reviser and the evaluation grader all build."""
    tmp = tmp_path_factory.mktemp("declared")
    with FakeEndpoint(scripts.fix_after_finding) as fake:
        return solve(fake, tmp, EVAL_PROBLEM, candidates=2).run_dir


@pytest.mark.parametrize("source", ["fixture", "fresh"])
def test_recorded_contexts_rebuild_and_carry_only_declared_fields(
    source: str, request: pytest.FixtureRequest
) -> None:
    run_dir = FIXTURE if source == "fixture" else request.getfixturevalue("evaluated_run")
    contexts = rebuilt_contexts(run_dir)
    assert contexts
    for role, recorded, rebuilt in contexts:
        kinds = roles.get_role(role).inputs_model.KINDS
        assert rebuilt["inputs"] == recorded["inputs"]["blob"], (role, recorded["call_id"])
        assert rebuilt["links"] == recorded["links"], (role, recorded["call_id"])
        assert set(recorded["links"]) <= set(kinds), role
        for name, links in recorded["links"].items():
            assert {link["kind"] for link in links} == {kinds[name]}, (role, name)
    if source == "fresh":
        assert {"generator", "verifier", "reviewer", "reviser"} <= {r for r, _, _ in contexts}
        assert any(r.startswith("grader") for r, _, _ in contexts)


def test_a_field_no_source_knows_is_refused() -> None:
    """The builder says where each declared kind comes from; a kind it has no source for (the
    reasoning no role may see) is refused, not silently left out."""
    state = RunState()
    builder = ContextBuilder(RunStore.__new__(RunStore), state, Problem.__new__(Problem), seed=0)
    call: Any = type("Call", (), {"call_id": "c1", "role": "generator", "target": None})()
    with pytest.raises(ValueError, match="no source for input thoughts"):
        builder._source(call, "thoughts", "generator_reasoning")
    assert json.dumps(sorted(DERIVED_SUFFIX)) == json.dumps(
        ["anonymised_proofs", "confirmed_findings", "pooled_proofs"]
    )
