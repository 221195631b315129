"""The end of a run: final/proof.md, final/result.json, the run.finished record, attestation."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from solver.loop.policy import (
    RunEnd,
    evaluation_calls,
    evaluation_score,
    grade_of,
    graded_score,
)
from solver.loop.proof_page import no_proof_page, proof_page
from solver.loop.state import LineageState, RunState
from solver.problems import Problem
from solver.records import BlobLink, ProofFacts, RunFinished

if TYPE_CHECKING:
    from solver.loop.engine import Recorder


def _answer_check(state: RunState, problem: Problem, proof: str) -> dict[str, Any] | None:
    if not problem.answer:
        return None
    from solver.answers import check_answer, extract_final_answer

    assert state.selected is not None
    lineage, version = state.selected
    producer = state.calls.get(state.lineages[lineage].versions[version].producer)
    facts = producer.facts if producer is not None else None
    given = facts.final_answer if isinstance(facts, ProofFacts) else None
    candidate = given or extract_final_answer(proof)
    if not candidate:
        return {"verdict": "undecided", "detail": "no final answer found", "candidate": None}
    check = check_answer(str(candidate), problem.answer)
    return {"verdict": check.verdict, "detail": check.detail, "candidate": candidate}


def _lineage_status(state: RunState, lineage: LineageState) -> str:
    """Where a lineage stood at the end: accepted, abandoned (why), or else its latest
    version's fate (cancelled, unusable, failed), and "open" only for a proof still in play."""
    if lineage.accepted_version is not None:
        return "accepted"
    if lineage.abandoned:
        return "abandoned: " + lineage.abandon_reason
    latest = lineage.latest
    if latest is None:
        return "open"
    producer = state.calls.get(latest.producer)
    if producer is not None and producer.status == "cancelled":
        return "cancelled"
    return latest.status if latest.status in ("unusable", "failed") else "open"


def summarise(state: RunState, wall_s: float) -> dict[str, Any]:
    by_role: dict[str, int] = {}
    failed = truncated = 0
    for call in state.calls.values():
        by_role[call.role] = by_role.get(call.role, 0) + 1
        failed += call.status == "failed"
        truncated += call.truncated
    return {
        "tokens": {
            "input": state.tokens_in,
            "output": state.tokens_out,
            "reasoning": state.tokens_reasoning,
            "total": state.tokens_total,
            "by_role": dict(sorted(state.tokens_by_role.items())),
        },
        "calls": {
            "total": len(state.calls),
            "by_role": dict(sorted(by_role.items())),
            "failed": failed,
            "truncated": truncated,
        },
        "lineages": {
            ln.lineage: _lineage_status(state, ln)
            for ln in sorted(state.lineages.values(), key=lambda x: x.index)
        },
        "wall_s": round(wall_s, 3),
        "sessions": state.sessions,
        "budget_exhausted": state.budget_exhausted or None,
    }


def reason_code(result: dict[str, Any]) -> str:
    """Why the run ended as it did, for scripts: ``accepted`` (the proof submitted passed
    its verifications), ``not_accepted`` (one was submitted that did not), ``no_proof``
    (calls completed, none gave a proof to submit), ``no_call_completed``."""
    selected = result.get("selected")
    if isinstance(selected, dict):
        return "accepted" if selected.get("accepted") else "not_accepted"
    calls = result.get("calls") or {}
    done = int(calls.get("total", 0)) - int(calls.get("failed", 0))
    return "no_proof" if done > 0 else "no_call_completed"


def explain(result: dict[str, Any], accepted: int) -> str:
    """The outcome in a sentence or two for the person who started the run (``reason``,
    the policy's own words, stays beside it in result.json)."""
    code = reason_code(result)
    selected = result.get("selected") or {}
    name = f"{selected.get('lineage')} v{selected.get('version')}"
    score = result.get("score")
    grade = "no grader gave it a grade" if score is None else f"the grader gave it {score}/7"
    if code == "accepted":
        how = (
            "the only accepted proof"
            if accepted <= 1
            else f"chosen by the selector among {accepted} accepted proofs"
        )
        text = f"A proof passed its verifications: {name}, {how}; {grade}."
    elif code == "not_accepted":
        text = (
            "No proof passed its verifications. The best attempt is submitted "
            f"({name}, not accepted); {grade}."
        )
    elif code == "no_proof":
        text = "No proof was produced that could be submitted."
    else:
        text = "No model call completed: check the endpoint and `solver status` of the run."
    stopped = result.get("budget_exhausted")
    if stopped:
        text += f" The search stopped early ({stopped})."
    return text


def write_finish(
    recorder: Recorder, problem: Problem, finish: RunEnd, wall_s: float
) -> dict[str, Any]:
    state = recorder.state
    store = recorder.store
    final: dict[str, BlobLink] = {}
    proof_text = ""
    selected: dict[str, Any] | None = None
    result: dict[str, Any] = {
        "run_id": store.manifest["run_id"],
        "problem": {"id": problem.id, "digest": problem.digest, "points": problem.points},
        "outcome": finish.outcome,
        "reason": finish.reason,
        "selected": None,
        "score": None,
        "evaluation_score": None,
        "answer_check": None,
        **summarise(state, wall_s),
    }
    if finish.selected is not None:
        lineage, version = finish.selected
        artifact = state.proof_text_artifact(lineage, version)
        assert artifact is not None
        proof_text = store.read_blob(artifact.blob).decode("utf-8")
        version_state = state.lineages[lineage].versions[version]
        selected = {
            "lineage": lineage,
            "version": version,
            "accepted": version_state.status == "accepted",
            "proof": artifact.blob,
            "reason": finish.reason,
        }
        result["selected"] = selected
        result["score"] = grade_of(state, version_state)  # None: ungraded
        result["answer_check"] = _answer_check(state, problem, proof_text)
        page = proof_page(
            problem,
            outcome=finish.outcome,
            reason=finish.reason,
            accepted=selected["accepted"],
            score=result["score"],
            answer_check=result["answer_check"],
            run_id=str(store.manifest["run_id"]),
            proof_text=proof_text,
        )
    else:
        page = no_proof_page(problem, outcome=finish.outcome, reason=finish.reason)
    ref = store.write_final("proof.md", page.encode())
    final["proof.md"] = BlobLink(blob=ref.digest, bytes=ref.size)
    graders = evaluation_calls(state)
    if finish.evaluation is not None and graders:
        result["evaluation_score"] = finish.evaluation["score"]
        result["evaluation"] = finish.evaluation
    elif graders:
        result["evaluation_score"] = evaluation_score(state)
        reconcile = state.calls.get("evaluate.reconcile")
        result["evaluation"] = {
            # None: that grader gave no grade (failed, cut off or unreadable).
            "scores": [graded_score(c) for c in graders],
            "reconciled": graded_score(reconcile) is not None,
        }
    result["reason_code"] = reason_code(result)
    result["explanation"] = explain(result, len(state.accepted()))
    # The journal as it stands just before run.finished: that record is line ``count`` and
    # its ``prev`` is ``head``, so the final files and the journal's end name each other.
    result["journal"] = {"count": store.next_seq, "head": store.head}
    data = json.dumps(result, indent=2, sort_keys=True, ensure_ascii=False).encode() + b"\n"
    ref = store.write_final("result.json", data)
    final["result.json"] = BlobLink(blob=ref.digest, bytes=ref.size)
    recorder.append(
        RunFinished(outcome=finish.outcome, final=final, summary=summarise(state, wall_s))
    )
    store.finish_attestation({name: store_ref(link) for name, link in final.items()})
    return result


def store_ref(link: BlobLink) -> Any:
    from solver.store import BlobRef

    return BlobRef(digest=link.blob, size=link.bytes)
