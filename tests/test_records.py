"""The typed records read every run made before them and write back the same bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from solver.config import resolve_settings
from solver.problems import Problem
from solver.records import (
    FACTS_ADAPTER,
    MANIFEST_FORMAT,
    CallCompleted,
    GradeFacts,
    LlmAbandoned,
    LlmFailed,
    Manifest,
    NoFacts,
    ProofFacts,
    ReviewFacts,
    RunResult,
    SelectionFacts,
    Usage,
    VerificationFacts,
    parse_loop_record,
)
from solver.run import build_manifest, resolve_endpoint
from solver.store import canonical_json

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "run-v1-signed"


def _journal() -> list[dict[str, object]]:
    lines = (FIXTURE / "journal.jsonl").read_bytes().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_the_pre_redesign_manifest_reads_and_writes_back_byte_for_byte() -> None:
    raw = (FIXTURE / "MANIFEST.json").read_bytes()
    manifest = Manifest.model_validate_json(raw)
    assert manifest.signing is not None and manifest.given_proof is None
    assert manifest.problem.record.id == "odd-squares"
    assert manifest.endpoint.source == "configured" and manifest.endpoint.gguf_sha256 is None
    assert canonical_json(manifest.to_json()).rstrip(b"\n") == raw.rstrip(b"\n")


def test_a_new_manifest_has_every_key_an_old_one_has(tmp_path: Path) -> None:
    problem = Problem(id="p", statement="Prove that 1 = 1.")
    resolved = resolve_settings(flags={"endpoint": "http://127.0.0.1:9/v1"}, env={}, cwd=tmp_path)
    endpoint, recorded = resolve_endpoint(resolved.settings)
    written = build_manifest(
        problem, None, resolved, endpoint, recorded, False, ["solve"], "run-id"
    ).to_json()
    old = json.loads((FIXTURE / "MANIFEST.json").read_bytes())
    assert set(written) == set(old) - {"signing"}
    assert written["format"] == MANIFEST_FORMAT  # the format new runs are made in
    assert set(written["endpoint"]) == set(old["endpoint"])
    assert set(written["problem"]["record"]) == set(old["problem"]["record"])


def test_a_manifest_key_a_newer_solver_added_is_kept() -> None:
    raw = json.loads((FIXTURE / "MANIFEST.json").read_bytes())
    raw["later"] = {"x": 1}
    assert Manifest.model_validate(raw).to_json()["later"] == {"x": 1}


def test_every_journal_line_of_the_old_run_reads_typed_and_dumps_as_it_was() -> None:
    kinds: set[type] = set()
    for line in _journal():
        typed = parse_loop_record(str(line["type"]), int(str(line["v"])), dict(line["data"]))  # type: ignore[call-overload]
        if typed is None:
            continue
        assert typed.data() == line["data"], line["seq"]
        if isinstance(typed, CallCompleted):
            kinds.add(type(typed.facts))
    assert {ProofFacts, VerificationFacts, ReviewFacts, GradeFacts} <= kinds


@pytest.mark.parametrize(
    ("data", "kind", "usable"),
    [
        ({}, NoFacts, True),
        ({"has_proof": False}, ProofFacts, True),
        ({"has_proof": True, "final_answer": None}, ProofFacts, True),
        ({"score": None}, GradeFacts, True),
        ({"shown": [["L0", 1], ["L1", 0]], "choice": ["L1", 0]}, SelectionFacts, True),
        # a choice that named no proof shown: the call is not counted as parsed
        ({"shown": [["L0", 1]]}, SelectionFacts, False),
    ],
)
def test_facts_are_told_by_their_keys_and_keep_them(
    data: dict[str, object], kind: type, usable: bool
) -> None:
    facts = FACTS_ADAPTER.validate_python(data)
    assert type(facts) is kind and facts.usable is usable
    assert FACTS_ADAPTER.dump_python(facts, mode="json") == data


def test_usage_writes_only_the_counts_it_was_given() -> None:
    failed = LlmFailed(
        call_id="c", attempt=1, response=None, error_kind="x", message="m", retryable=False
    )
    assert failed.data()["usage"] == {}
    cut = LlmAbandoned(
        call_id="c", attempt=1, reason="r", usage=Usage(input_tokens=3, output_tokens=4)
    )
    assert cut.data()["usage"] == {"input_tokens": 3, "output_tokens": 4}
    assert cut.usage is not None and cut.usage.total == 7 and cut.usage.reasoning_tokens == 0


def test_the_old_result_file_reads_typed_and_writes_back_unchanged() -> None:
    raw = json.loads((FIXTURE / "final" / "result.json").read_bytes())
    result = RunResult.model_validate(raw)
    assert result.outcome == "solved" and result.selected is not None
    assert result.selected.accepted and result.score == 7
    assert result.to_json() == raw
    assert RunResult(outcome="failed").to_json() == {"outcome": "failed"}
