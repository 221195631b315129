"""A calibration's grading runs: planned (one grading-only run per graded proof, ``OUT/<item>/``,
no solve phase; G graders in evaluation mode, resumable like `solver eval`), and read back into
one row per proof (its grades, and with ``--verifications N`` or comparisons, the verifiers'
verdicts, the reviews and the selector's choices on the given proof).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solver.config import Settings
from solver.evaluation.evaluate import Job, JobResult, file_digest, prepare_out, run_settings
from solver.evaluation.graded_file import GradedProof
from solver.evaluation.scores import Agreement, agreement
from solver.loop.state import (
    BLOCKING_SEVERITIES,
    GIVEN,
    RunState,
    given_comparisons,
    review_calls,
    rival_lineage,
)
from solver.roles import ReviewFacts, SelectionFacts, VerificationFacts
from solver.run import read_state


@dataclass(frozen=True)
class CalibrationPlan:
    """The grading runs of one calibration, each in its own directory under ``out_dir``."""

    file: Path
    out_dir: Path
    digest: str
    graders: int
    jobs: tuple[Job, ...]
    verifications: int = 0  # of each given proof by each verifier variant
    comparisons: bool = False  # of each given proof with its rivals (rivals_of)


def rivals_of(items: list[GradedProof]) -> dict[str, list[GradedProof]]:
    """Each item's rivals: the later items of the same problem statement that humans graded
    differently, in file order (so each pair is compared once, in the earlier item's run)."""
    by_problem: dict[str, list[GradedProof]] = {}
    for item in items:  # grouped first: a file of many problems is not compared all to all
        by_problem.setdefault(item.problem.statement, []).append(item)
    rivals: dict[str, list[GradedProof]] = {}
    for group in by_problem.values():
        for i, item in enumerate(group):
            rivals[item.item] = [other for other in group[i + 1 :] if other.human != item.human]
    return rivals


def plan_calibration(
    file: Path, items: list[GradedProof], out_dir: Path, settings: Settings
) -> CalibrationPlan:
    """Prepare ``out_dir`` for these graded proofs and settings (refusing one made for others)
    and name every grading run's directory."""
    digest = file_digest(file)
    identity = {"digest": digest, "items": [i.item for i in items]}
    graders = settings.grading.evaluation_graders
    verifications = settings.grading.given_verifications
    comparisons = settings.grading.given_comparisons
    # (a directory made before a setting existed has no such key, and compares as before)
    fixed = run_settings(settings, solve=False) | {
        "given_verifications": verifications,
        "given_comparisons": comparisons,
    }
    names = prepare_out(
        out_dir,
        identity,
        kind="calibration",
        extra={"file": str(file), "graders": graders},
        settings=fixed,
    )
    rivals = rivals_of(items) if comparisons else {}
    jobs = tuple(
        Job(
            i.item,
            1,
            out_dir / names[i.item],
            i.problem,
            given_proof=i.proof,
            rival_proofs=tuple(r.proof for r in rivals.get(i.item, [])),
        )
        for i in items
    )
    return CalibrationPlan(file, out_dir, digest, graders, jobs, verifications, comparisons)


def calibration_report(
    items: list[GradedProof],
    results: list[JobResult],
    verifications: int = 0,
    comparisons: bool = False,
) -> tuple[Agreement | None, list[dict[str, Any]]]:
    """Agreement over the items whose grading run finished, and one row per item (with its
    verifiers' verdicts when ``verifications`` were asked of each variant, and the
    selector's choices between it and its rivals with ``comparisons``)."""
    by_item = {r.job.key: r for r in results}
    rivals = rivals_of(items) if comparisons else {}
    rows: list[dict[str, Any]] = []
    pairs: list[tuple[str, float, float]] = []
    for graded in items:
        done = by_item.get(graded.item)
        result = done.result if done is not None else {}
        finished = done is not None and done.status == "finished"
        model = result.get("evaluation_score") if finished else None
        evaluation = result.get("evaluation") or {}
        rivals_here = rivals.get(graded.item, [])
        # the run's journal is read once, for whatever of it this calibration asked
        state = (
            read_state(done.job.run_dir)[1]
            if done is not None and finished and (verifications or rivals_here)
            else None
        )
        rows.append(
            {
                "item": graded.item,
                "human": graded.human,
                "model": model,
                # Graded, but no grade could be read: left out of the agreement, and said so.
                "ungraded": finished and model is None,
                "grader_scores": evaluation.get("scores", []),
                # Each grader's last grade (re-judged or first): what every aggregation uses.
                "final_grades": evaluation.get("final", evaluation.get("scores", [])),
                "reconciled": bool(evaluation.get("reconciled")),
                "status": done.status if done else "unfinished",
                "error": done.error if done else "",
                "run_dir": str(done.job.run_dir) if done else "",
                "verifications": given_verdicts(state) if state and verifications else {},
                "reviews": given_reviews(state) if state and verifications else {},
                "comparisons": given_choices(state, graded, rivals_here) if state else [],
            }
        )
        if model is not None:
            pairs.append((graded.item, graded.human, float(model)))
    return (agreement(pairs) if pairs else None), rows


def given_verdicts(state: RunState) -> dict[str, list[str | None]]:
    """A grading-only run's verdicts on its given proof, by verifier variant in call order:
    "pass", "fail", or None where none could be read (the call failed, was cut off or was
    not parsed)."""
    calls = [c for c in state.calls.values() if c.lineage == GIVEN and c.role == "verifier"]
    calls.sort(key=lambda c: int(c.call_id.rsplit(".", 1)[-1]))
    verdicts: dict[str, list[str | None]] = {}
    for call in calls:
        facts = call.facts if call.status == "completed" else None
        verdict = facts.verdict if isinstance(facts, VerificationFacts) else None
        verdicts.setdefault(call.variant, []).append(verdict)
    return verdicts


def given_choices(
    state: RunState, graded: GradedProof, rivals: list[GradedProof]
) -> list[dict[str, Any]]:
    """The selector's choices between a grading-only run's given proof and each of its
    rivals: ``ab`` with the given proof shown first, ``ba`` with the rival first; each
    "given", "rival", or None where no choice could be read."""
    if not rivals:
        return []
    chosen: dict[str, dict[str, str | None]] = {}
    for call_id, _, lineage in given_comparisons(state):
        call = state.calls.get(call_id)
        facts = call.facts if call is not None and call.status == "completed" else None
        choice = facts.choice if isinstance(facts, SelectionFacts) else None
        side = None if choice is None else "given" if choice[0] == GIVEN else "rival"
        chosen.setdefault(lineage, {})[call_id.rsplit(".", 1)[-1]] = side
    return [
        {
            "rival": rival.item,
            "human": [graded.human, rival.human],
            "choices": chosen.get(rival_lineage(number), {"ab": None, "ba": None}),
        }
        for number, rival in enumerate(rivals)
    ]


def given_reviews(state: RunState) -> dict[str, int]:
    """How the reviewer judged the blocking findings of a grading-only run's verifications
    of its given proof: ``findings`` (critical or major, in verifications with a verdict),
    ``upheld`` (confirmed at a blocking severity, so the finding fails the proof),
    ``overturned`` (rejected, or confirmed only as minor) and ``unread`` (no review read)."""
    reviews = {c.target: c for c in review_calls(state, GIVEN, 0)}
    counts = {"findings": 0, "upheld": 0, "overturned": 0, "unread": 0}
    for call in state.calls.values():
        facts = call.facts
        if call.lineage != GIVEN or call.role != "verifier" or call.status != "completed":
            continue
        if call.truncated or not isinstance(facts, VerificationFacts) or facts.verdict is None:
            continue
        blocking = [f for f in facts.findings if f.severity in BLOCKING_SEVERITIES]
        review = reviews.get(call.call_id)
        judged = review.facts if review is not None and review.status == "completed" else None
        for finding in blocking:
            counts["findings"] += 1
            if not isinstance(judged, ReviewFacts) or finding.id not in {
                *judged.confirmed,
                *judged.rejected,
            }:
                counts["unread"] += 1
            elif finding.id in judged.confirmed and (
                judged.severity.get(finding.id, finding.severity) in BLOCKING_SEVERITIES
            ):
                counts["upheld"] += 1
            else:
                counts["overturned"] += 1
    return counts
