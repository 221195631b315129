"""The audit of a run with a final round of verification and pairwise selection: clean as
made, and a selector shown other proofs than its match names, or not two final candidates,
fails the isolation check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from solver.audit import audit_run
from solver.store import RunReader, RunStore
from tests.loop.forge import failing, rewrite
from tests.loop.harness import ScriptedEndpoint, solve
from tests.loop.test_final_checks import best_marked


@pytest.fixture(scope="module")
def pairwise_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("pairwise")
    with ScriptedEndpoint(best_marked("best")) as fake:
        return solve(
            fake,
            tmp,
            candidates=3,
            acceptance__accepted_needed=3,
            acceptance__final_verifications=2,
            acceptance__pairwise_selection=True,
        ).run_dir


def _link(store: RunStore, data: bytes) -> dict[str, Any]:
    ref = store.put_blob(data)
    return {"blob": ref.digest, "bytes": ref.size}


def test_a_run_with_a_final_round_and_pairwise_selection_audits_clean(
    pairwise_run: Path,
) -> None:
    kinds = [
        r.data.get("variant") for r in RunReader(pairwise_run).records() if r.type == "call.planned"
    ]
    assert kinds.count("pairwise") == 4
    calls = [
        r.data["call_id"] for r in RunReader(pairwise_run).records() if r.type == "call.planned"
    ]
    assert sum(".final." in c and not c.endswith(".review") for c in calls) == 6
    report = audit_run(pairwise_run)
    assert report.ok, [c for c in report.checks if c.status != "pass"]
    isolation = next(c for c in report.checks if c.name == "isolation")
    assert "findings and proof lists rebuilt" in isolation.detail


def test_a_pairwise_selector_shown_its_proofs_swapped_fails(
    pairwise_run: Path, tmp_path: Path
) -> None:
    forged: list[str] = []

    def edit(store: RunStore, type_: str, data: dict[str, Any]) -> dict[str, Any]:
        if type_ == "artifact.put" and data["artifact"] == "select.1.0.ab.proofs":
            proofs = json.loads(store.read_blob(data["blob"]["blob"]))
            data["blob"] = _link(store, json.dumps(list(reversed(proofs))).encode())
            forged.append(data["artifact"])
        return data

    found = failing(rewrite(pairwise_run, tmp_path / "f", edit), "isolation")
    assert forged, "the source run has no pairwise selector call"
    assert any(
        "select.1.0.ab.proofs (anonymised_proofs) is not what the recorded" in f for f in found
    ), found


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("L0.v0,L0.v0", "shows 1 different proofs to a pairwise selector, not 2"),
        ("L0.v0,L1.v7", "shows L1.v7, which is no final candidate"),
    ],
)
def test_a_pairwise_selector_not_shown_two_final_candidates_fails(
    pairwise_run: Path, tmp_path: Path, target: str, why: str
) -> None:
    def edit(store: RunStore, type_: str, data: dict[str, Any]) -> dict[str, Any]:
        if type_ == "call.planned" and data["call_id"] == "select.1.0.ab":
            data["target"] = target
        return data

    found = failing(rewrite(pairwise_run, tmp_path / "t", edit), "isolation")
    assert any(f"select.1.0.ab.proofs (anonymised_proofs) {why}" in f for f in found), found
