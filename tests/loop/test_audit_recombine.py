"""The audit of a run with the generator's self-improvement turn and a recombination: clean as
made, and failing when a recombiner's pool holds anything its declaration does not derive (a
finding no review confirmed, a proof of another lineage) or the declaration itself is bad."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from solver import roles
from solver.audit import audit_run
from solver.store import RunStore
from solver.testing import RecordedRequest
from solver.testing.fake_endpoint import Reply
from tests.loop import scripts
from tests.loop.forge import failing, rewrite
from tests.loop.harness import ScriptedEndpoint, solve
from tests.loop.test_audit_rederive import Reprompt, link


def flawed_until_recombined(request: RecordedRequest) -> Reply:
    """Both turns of the generator keep a flaw verifiers find, in words of their own per
    generator variant (so two lineages' proofs differ); the recombination is correct."""
    role = scripts.role_of(request)
    if role == "recombiner":
        return scripts.proof_reply(scripts.GOOD_PROOF)
    if role == "generator":
        words = hashlib.sha256(request.system_text.encode()).hexdigest()[:8]
        return scripts.proof_reply(f"We argue in the way {words}. {scripts.FLAWED_PROOF}")
    return scripts.never_accepted(request)


@pytest.fixture(scope="module")
def recombined_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("recombined")
    with ScriptedEndpoint(flawed_until_recombined) as fake:
        outcome = solve(
            fake,
            tmp,
            candidates=2,
            acceptance__accepted_needed=1,
            acceptance__max_failed_rounds=1,
            acceptance__self_improve=True,
            acceptance__recombine=2,
            budget__calls=40,
        )
    return outcome.run_dir


def _pool_of(run: Path) -> bytes:
    for line in (run / "journal.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["type"] == "artifact.put" and rec["data"]["kind"] == "pooled_proofs":
            digest = rec["data"]["blob"]["blob"].removeprefix("sha256:")
            return (run / "blobs" / "sha256" / digest[:2] / digest).read_bytes()
    raise AssertionError("no pool")


PoolEdit = Callable[[RunStore, list[str]], list[str]]


def _forge_pool(src: Path, dst: Path, change: PoolEdit) -> Path:
    """``src`` with each recombination's pool changed by ``change`` and the recombiner's
    inputs, prompt and request bodies made consistent with it: only the re-derivation of the
    pool can tell."""
    forged: dict[str, list[str]] = {}
    reprompt = Reprompt()

    def edit(store: RunStore, type_: str, data: dict[str, Any]) -> dict[str, Any]:
        if type_ == "artifact.put" and data["kind"] == "pooled_proofs":
            pool = change(store, json.loads(store.read_blob(data["blob"]["blob"])))
            data["blob"] = link(store, json.dumps(pool, indent=2, ensure_ascii=False).encode())
            forged[data["artifact"]] = pool
        elif type_ == "context.built" and data["role"] == "reviser:recombine":
            inputs = json.loads(store.read_blob(data["inputs"]["blob"]))
            (pool_link,) = data["links"]["pooled_proofs"]
            inputs["pooled_proofs"] = forged[pool_link["artifact"]]
            canonical = json.dumps(
                inputs, sort_keys=True, separators=(",", ":"), ensure_ascii=False
            ).encode()
            data["inputs"] = link(store, canonical)
            pool_link["blob"] = link(
                store, json.dumps(inputs["pooled_proofs"], indent=2, ensure_ascii=False).encode()
            )["blob"]
            model = roles.get_role("reviser:recombine").inputs_model.model_validate(inputs)
            rendered = [list(m) for m in roles.render("reviser:recombine", "standard", model)]
            reprompt.context(store, data, rendered)
        elif type_ == "llm.started":
            reprompt.started(store, data)
        return data

    run = rewrite(src, dst, edit)
    assert forged, "the source run has no recombination"
    return run


def test_a_run_with_self_improvement_and_recombination_audits_clean(recombined_run: Path) -> None:
    report = audit_run(recombined_run)
    assert report.ok, [c for c in report.checks if c.status != "pass"]
    journal = (recombined_run / "journal.jsonl").read_text()
    assert '"role":"generator:improve"' in journal and '"role":"reviser:recombine"' in journal
    manifest = json.loads((recombined_run / "MANIFEST.json").read_text())
    assert manifest["roles"]["policy"]["reviser:recombine"] == [
        "pooled_proofs",
        "problem_statement",
    ]


def test_a_finding_no_review_confirmed_in_the_pool_fails(
    recombined_run: Path, tmp_path: Path
) -> None:
    extra = (
        "\n\n### Finding C9 (severity: major)\nLocation: the final step\n"
        "Explanation: a finding no reviewer confirmed."
    )
    run = _forge_pool(recombined_run, tmp_path / "f", lambda s, pool: [pool[0] + extra, *pool[1:]])
    report = audit_run(run)
    assert {c.name for c in report.checks if c.status == "fail"} == {"isolation"}
    found = failing(run, "isolation")
    assert any("(pooled_proofs) is not what the recorded" in f for f in found), found


def test_a_proof_of_an_undeclared_lineage_in_the_pool_fails(
    recombined_run: Path, tmp_path: Path
) -> None:
    # the second entry replaced by the first: a proof of a lineage the declaration names once
    run = _forge_pool(recombined_run, tmp_path / "p", lambda s, pool: [pool[0], pool[0]])
    assert len(set(json.loads(_pool_of(recombined_run)))) == 2  # the two proofs differ
    found = failing(run, "isolation")
    assert any("(pooled_proofs) is not what the recorded" in f for f in found), found


def test_a_declaration_of_one_lineage_twice_fails(recombined_run: Path, tmp_path: Path) -> None:
    def edit(store: RunStore, type_: str, data: dict[str, Any]) -> dict[str, Any]:
        if type_ == "call.planned" and data["role"] == "reviser:recombine":
            first = str(data["target"]).split(",")[0]
            data["target"] = f"{first},{first}"
        return data

    found = failing(rewrite(recombined_run, tmp_path / "d", edit), "isolation")
    assert any("(pooled_proofs) cannot be re-derived" in f for f in found), found


def test_pooled_proofs_given_to_another_role_fail(recombined_run: Path, tmp_path: Path) -> None:
    def edit(store: RunStore, type_: str, data: dict[str, Any]) -> dict[str, Any]:
        if type_ == "context.built" and data["role"] == "reviser:recombine":
            data["role"] = "reviser"
        return data

    found = failing(rewrite(recombined_run, tmp_path / "r", edit), "isolation")
    assert any("role reviser may not see pooled_proofs" in f for f in found), found
