"""`solver eval calibrate FILE`: grade proofs that humans already graded, and measure agreement.

FILE is JSON Lines, one graded proof a line, in either shape:

- DeepSeekMath-V2 outputs: ``{"question", "problem_idx", "model_prediction": {"proof",
  "human_rating"}}``;
- generic: ``{"id", "problem" | "statement" | "question", "proof" | "response",
  "human_grade" | "human_rating" | "points", "reference_solution"?, "grading_guidelines"?,
  "max_points"?}``.

Each proof is graded by a grading-only run (``OUT/<item>/``, no solve phase; G graders in
evaluation mode, re-judging when they disagree), resumable like `solver eval`. Agreement is
reported for the configured aggregation and, from the same recorded grades, for each of
minimum, median and mean, so choosing one needs no second grading. Human grades on
another scale (``max_points``) are mapped to 0-7 before comparing.

With ``--verifications N`` each given proof is also verified N times by each verifier
variant, beside its grading, and the verdicts are read against the humans' grades: how
often each variant fails a proof humans graded below 7 and one they graded 7, on how many
flawed proofs a variant passed every time (its blind spots), how far two variants' blind
spots coincide, and how many flawed proofs every variant passed. These are the policy lab's
``detect``, ``false_alarm``, ``p_hidden`` and ``variant_correlation``, measured on the target
model (docs/bench-policy.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from solver.config import Settings
from solver.evaluation.evaluate import Job, JobResult, file_digest, prepare_out, run_settings
from solver.evaluation.scores import FULL_GRADE, Agreement, agreement, pearson
from solver.evaluation.set_run import served_model
from solver.loop.grading import AGGREGATIONS, aggregate
from solver.loop.state import (
    BLOCKING_SEVERITIES,
    GIVEN,
    RunState,
    given_comparisons,
    review_calls,
    rival_lineage,
)
from solver.problems import Problem, read_checked_text
from solver.roles import ReviewFacts, SelectionFacts, VerificationFacts
from solver.run import read_state
from solver.store import write_atomic

MAX_FILE_BYTES = 256 * 1024 * 1024
CALIBRATION_FORMAT = "solver-calibration/1"


@dataclass(frozen=True)
class GradedProof:
    item: str
    problem: Problem
    proof: str
    human: float  # on the 0-7 scale


def _first(row: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if row.get(key) not in (None, ""):
            return row[key]
    return None


class _Ungraded(ValueError):
    """A line that names a human grade and leaves it empty (as `solver eval proofs` writes)."""


def _graded(path: Path, line_no: int, row: dict[str, Any]) -> GradedProof:
    where = f"{path}: line {line_no}"
    prediction = row.get("model_prediction")
    # DeepSeekMath-V2 outputs nest the proof and its human grade.
    merged = {**row, **prediction} if isinstance(prediction, dict) else row
    item = _first(merged, "id", "problem_idx", "item")
    statement = _first(merged, "problem", "statement", "question")
    proof = _first(merged, "proof", "response")
    human = _first(merged, "human_grade", "human_rating", "points")
    if statement is not None and proof is not None and human is None and "human_grade" in merged:
        raise _Ungraded(f"{where}: no human grade yet")
    if statement is None or proof is None or human is None:
        raise ValueError(f"{where}: needs a problem statement, a proof and a human grade")
    if not isinstance(human, int | float) or isinstance(human, bool):
        raise ValueError(f"{where}: the human grade {human!r} is not a number")
    max_points = _first(merged, "max_points") or FULL_GRADE
    if not isinstance(max_points, int | float) or max_points <= 0 or not 0 <= human <= max_points:
        raise ValueError(f"{where}: the human grade {human} is not within 0-{max_points}")
    item = str(item if item is not None else f"line-{line_no}")
    try:
        problem = Problem(
            id=item,
            statement=str(statement),
            reference_solution=_first(merged, "reference_solution", "solution"),
            grading_guidelines=_first(merged, "grading_guidelines", "rubric"),
            origin=f"{path.name}#line-{line_no}",
        )
    except ValidationError as exc:
        raise ValueError(f"{where}: {exc.errors()[0]['msg']}") from None
    return GradedProof(item, problem, str(proof), human * FULL_GRADE / max_points)


def load_graded(path: Path) -> list[GradedProof]:
    """Read FILE; every problem is one line "FILE: line N: what is wrong" (InputError)."""
    from solver.problems import input_error

    _, text = read_checked_text(path, extensions=(".jsonl",), max_bytes=MAX_FILE_BYTES)
    items: list[GradedProof] = []
    ungraded: list[int] = []
    seen: set[str] = set()
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise input_error(path, f"line {line_no}: not JSON ({exc.msg})") from None
        except RecursionError:
            raise input_error(path, f"line {line_no}: not JSON (nested too deeply)") from None
        except ValueError as exc:  # an integer of more digits than Python converts
            raise input_error(path, f"line {line_no}: not JSON ({exc})") from None
        if not isinstance(row, dict):
            raise input_error(path, f"line {line_no}: not a JSON object")
        try:
            graded = _graded(path, line_no, row)
        except _Ungraded:
            ungraded.append(line_no)
            continue
        except ValueError as exc:
            raise input_error(path, str(exc).split(": ", 1)[1]) from None
        if graded.item in seen:
            graded = GradedProof(
                f"{graded.item}@line-{line_no}", graded.problem, graded.proof, graded.human
            )
        seen.add(graded.item)
        items.append(graded)
    if ungraded:
        shown = ", ".join(map(str, ungraded[:10])) + (", ..." if len(ungraded) > 10 else "")
        raise input_error(
            path,
            f"{len(ungraded)} of {len(ungraded) + len(items)} proofs have no human grade yet "
            f"(line {shown}): write each line's human_grade before calibrating",
        )
    if not items:
        raise input_error(path, "no graded proofs in the file")
    return items


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


def calibration_header(plan: CalibrationPlan, results: list[JobResult]) -> dict[str, Any]:
    """What the calibration is of: the input file, G and the model that graded."""
    return {
        "input": {"path": str(plan.file), "digest": plan.digest},
        "graders": plan.graders,
        "verifications": plan.verifications,
        "comparisons": plan.comparisons,
        "model": served_model(results),
    }


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


def selector_figures(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The pairwise selector against the humans, from the items' recorded choices (None when
    no comparison was made): how often it chose the proof humans graded higher, how often
    the proof shown first, and how often its two orders agreed."""
    choices = [
        (compared["human"], order, side)
        for row in rows
        for compared in row.get("comparisons") or []
        for order, side in compared["choices"].items()
    ]
    if not choices:
        return None
    made = [(human, order, side) for human, order, side in choices if side is not None]
    higher = sum(1 for (given, rival), _, side in made if (side == "given") == (given > rival))
    first = sum(1 for _, order, side in made if (side == "given") == (order == "ab"))
    pairs = [c["choices"] for row in rows for c in row.get("comparisons") or []]
    both = [p for p in pairs if p.get("ab") is not None and p.get("ba") is not None]
    return {
        "comparisons": len(pairs),
        "calls": len(choices),
        "choices": len(made),
        "chose_higher": higher,
        "chose_first": first,
        "orders_agree": sum(1 for p in both if p["ab"] == p["ba"]),
        "both_orders": len(both),
        "higher_share": _share(higher, len(made)),
    }


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


def false_share(correct: dict[str, int], flawed: dict[str, int]) -> float:
    """Of the blocking findings on flawed proofs (``flawed["findings"]`` > 0), the share taken
    to be false alarms: the findings per verdict on proofs graded 7 (``correct["verdicts"]``
    > 0), times the flawed proofs' verdicts, over their findings; at most 1."""
    per_verdict = correct["findings"] / correct["verdicts"]
    return min(per_verdict * flawed["verdicts"] / flawed["findings"], 1.0)


def confirmed_real(upheld: float, reject_false: float, false: float) -> float:
    """The share of real findings a reviewer confirms, from the share ``upheld`` of all the
    findings on flawed proofs, of which the share ``false`` (< 1) are false alarms upheld at
    ``1 - reject_false``: ``upheld = c (1 - false) + (1 - reject_false) false``, held to 0-1."""
    return min(max((upheld - (1 - reject_false) * false) / (1 - false), 0.0), 1.0)


def reviewer_figures(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The reviewer against the humans, from the items' recorded reviews (None when no
    verification was asked). On a proof humans graded 7 every blocking finding is a false
    alarm, so the share overturned there is how often the reviewer rejects a false finding.
    On a flawed proof a finding may be real or false: the false ones are taken to come at the
    rate they come on proofs graded 7 (per verdict), and are reviewed as those are; what is
    upheld beyond them is the share of real findings the reviewer confirms."""
    graded = [r for r in rows if r["status"] == "finished" and r.get("reviews")]
    if not graded:
        return None

    def pooled(part: list[dict[str, Any]]) -> dict[str, int]:
        total = {"findings": 0, "upheld": 0, "overturned": 0, "unread": 0, "verdicts": 0}
        for row in part:
            for key in ("findings", "upheld", "overturned", "unread"):
                total[key] += int(row["reviews"].get(key, 0))
            verdicts = row.get("verifications") or {}
            total["verdicts"] += sum(v is not None for vs in verdicts.values() for v in vs)
        return total

    correct = pooled([r for r in graded if r["human"] >= FULL_GRADE])
    flawed = pooled([r for r in graded if r["human"] < FULL_GRADE])
    decided_correct = correct["upheld"] + correct["overturned"]
    reject_false = _share(correct["overturned"], decided_correct)
    decided_flawed = flawed["upheld"] + flawed["overturned"]
    false = None  # of the flawed proofs' decided findings, the share taken to be false
    confirm_real = None
    if correct["verdicts"] and decided_flawed and reject_false is not None:
        false = false_share(correct, flawed)
        if false < 1.0:
            upheld = flawed["upheld"] / decided_flawed
            confirm_real = confirmed_real(upheld, reject_false, false)
    return {
        "on_correct": correct,
        "on_flawed": flawed,
        "reject_false": reject_false,
        "upheld_on_flawed": _share(flawed["upheld"], decided_flawed),
        "false_share_on_flawed": false,
        "confirm_real": confirm_real,
    }


def verifier_figures(rows: list[dict[str, Any]], per_variant: int) -> dict[str, Any] | None:
    """Each verifier variant against the humans, from the items' recorded verdicts (None
    when no verification was asked). A proof is flawed when humans graded it below 7; a
    variant is blind to a flawed proof when every verdict it gave passed it."""
    if not per_variant:
        return None
    graded = [row for row in rows if row["status"] == "finished" and row["verifications"]]
    # in the variants' turn order, as the runs called them
    names = list(dict.fromkeys(name for row in graded for name in row["verifications"]))
    flawed = [row for row in graded if row["human"] < FULL_GRADE]
    correct = [row for row in graded if row["human"] >= FULL_GRADE]

    def given(row: dict[str, Any], name: str) -> list[str]:
        return [v for v in row["verifications"].get(name, []) if v is not None]

    def blind(row: dict[str, Any], *names: str) -> float:
        """1.0 when every verdict of these variants on the row passed its proof."""
        return float(all(v == "pass" for name in names for v in given(row, name)))

    variants: dict[str, Any] = {}
    for name in names:
        on_flawed = [v for row in flawed for v in given(row, name)]
        on_correct = [v for row in correct for v in given(row, name)]
        judged = [row for row in flawed if given(row, name)]
        variants[name] = {
            "verifications_of_flawed": len(on_flawed),
            "fails_on_flawed": _share(on_flawed.count("fail"), len(on_flawed)),
            "blind": _share(int(sum(blind(row, name) for row in judged)), len(judged)),
            "verifications_of_correct": len(on_correct),
            "fails_on_correct": _share(on_correct.count("fail"), len(on_correct)),
            "no_verdict": sum(row["verifications"].get(name, []).count(None) for row in graded),
        }
    pairs: dict[str, float | None] = {}
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            both = [row for row in flawed if given(row, first) and given(row, second)]
            a = [blind(row, first) for row in both]
            b = [blind(row, second) for row in both]
            pairs[f"{first}|{second}"] = pearson(a, b) if len(both) > 1 else None
    defined = [r for r in pairs.values() if r is not None]
    judged_by_all = [row for row in flawed if all(given(row, name) for name in names)]
    hidden = int(sum(blind(row, *names) for row in judged_by_all))
    return {
        "per_variant": per_variant,
        "flawed_proofs": len(flawed),
        "correct_proofs": len(correct),
        "variants": variants,
        "hidden_from_all": _share(hidden, len(judged_by_all)),
        "hidden_count": [hidden, len(judged_by_all)],
        "blind_correlation": pairs,
        "mean_blind_correlation": sum(defined) / len(defined) if defined else None,
    }


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def agreement_by_aggregation(rows: list[dict[str, Any]]) -> dict[str, Agreement | None]:
    """Agreement with the humans had each aggregation made the grade, from the graders'
    recorded grades: no proof is graded again to compare minimum, median and mean."""
    out: dict[str, Agreement | None] = {}
    for how in AGGREGATIONS:
        pairs = []
        for row in rows:
            if row["status"] != "finished":
                continue
            grades = [g for g in row.get("final_grades") or [] if isinstance(g, int | float)]
            score = aggregate(grades, how)
            if score is not None:
                pairs.append((str(row["item"]), float(row["human"]), float(score)))
        out[how] = agreement(pairs) if pairs else None
    return out


def _fmt(value: float | None) -> str:
    return "undefined (no variance)" if value is None else f"{value:.3f}"


def calibration_markdown(
    source: str,
    graders: int,
    agreed: Agreement | None,
    rows: list[dict[str, Any]],
    verifiers: dict[str, Any] | None = None,
    reviewers: dict[str, Any] | None = None,
    selectors: dict[str, Any] | None = None,
) -> str:
    lines = [
        f"# Grader calibration: {source}",
        "",
        f"{len(rows)} graded proofs, {graders} grader(s) each.",
        "",
    ]
    ungraded = [row["item"] for row in rows if row.get("ungraded")]
    if ungraded:
        lines += [f"Ungraded (no grade could be read; not compared): {', '.join(ungraded)}.", ""]
    if agreed is None:
        lines += ["No grading run has finished with a grade yet.", ""]
    else:
        lines += [
            f"- exact agreement: {agreed.exact:.1%} ({round(agreed.exact * agreed.n)}/{agreed.n})",
            f"- within one point: {agreed.within_one:.1%}",
            f"- Pearson correlation: {_fmt(agreed.pearson)}",
            f"- Spearman correlation: {_fmt(agreed.spearman)}",
            f"- mean absolute difference: {agreed.mean_abs_error:.2f} points",
            f"- bias (model - human): {agreed.bias:+.2f} points",
            "",
            "## Disagreements",
            "",
        ]
        if not agreed.disagreements:
            lines.append("None.")
        for d in agreed.disagreements:
            lines.append(f"- {d.item}: human {d.human:g}, model {d.model:g} ({d.difference:+g})")
        lines.append("")
    by_how = agreement_by_aggregation(rows)
    if any(by_how.values()):
        lines += [
            "## Agreement per aggregation",
            "",
            "From the same recorded grades, had each aggregation made the grade:",
            "",
            "| aggregation | n | exact | within one | Pearson | Spearman | mean abs. diff. "
            "| bias |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for how, a in by_how.items():
            if a is None:
                lines.append(f"| {how} | 0 | - | - | - | - | - | - |")
                continue
            lines.append(
                f"| {how} | {a.n} | {a.exact:.1%} | {a.within_one:.1%} | {_fmt(a.pearson)} | "
                f"{_fmt(a.spearman)} | {a.mean_abs_error:.2f} | {a.bias:+.2f} |"
            )
        lines.append("")
    if verifiers is not None:
        lines += _verifier_lines(verifiers)
    if reviewers is not None:
        lines += _reviewer_lines(reviewers)
    if selectors is not None:
        lines += _selector_lines(selectors)
    lines += [
        "## Items",
        "",
        "| item | human | model | graders | status |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        model = (
            "ungraded"
            if row.get("ungraded")
            else "-"
            if row["model"] is None
            else str(row["model"])
        )
        scores = ", ".join("-" if s is None else str(s) for s in row["grader_scores"])
        mark = " (reconciled)" if row["reconciled"] else ""
        status = row["status"] + (f": {row['error']}" if row["error"] else "")
        lines.append(
            f"| {row['item']} | {row['human']:g} | {model} | {scores}{mark} | "
            f"{status.replace('|', '/')} |"
        )
    lines.append("")
    return "\n".join(lines)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _verifier_lines(figures: dict[str, Any]) -> list[str]:
    hidden, judged = figures["hidden_count"]
    mean = figures["mean_blind_correlation"]
    lines = [
        "## Verifier variants",
        "",
        f"Each proof verified {figures['per_variant']} time(s) by each variant; "
        f"{figures['flawed_proofs']} proof(s) humans graded below 7 (flawed), "
        f"{figures['correct_proofs']} graded 7. Blind: a flawed proof the variant passed "
        "every time.",
        "",
        "| variant | verifications of flawed | fails on flawed | blind | fails on correct |",
        "|---|---|---|---|---|",
    ]
    for name, v in figures["variants"].items():
        lines.append(
            f"| {name} | {v['verifications_of_flawed']} | {_percent(v['fails_on_flawed'])} | "
            f"{_percent(v['blind'])} | {_percent(v['fails_on_correct'])} |"
        )
    lines += [
        "",
        f"- hidden from every variant: {_percent(figures['hidden_from_all'])} ({hidden}/{judged})",
        "- correlation of blind spots (mean over pairs): "
        + ("undefined (no variance)" if mean is None else f"{mean:.3f}"),
    ]
    lines += [f"  - {pair}: {_fmt(r)}" for pair, r in figures["blind_correlation"].items()]
    return [*lines, ""]


def _reviewer_lines(figures: dict[str, Any]) -> list[str]:
    correct, flawed = figures["on_correct"], figures["on_flawed"]
    lines = [
        "## Reviewer",
        "",
        "The reviews of the verifications above, over their critical and major findings. "
        "Upheld: confirmed at a blocking severity; overturned: rejected or made minor.",
        "",
        "| proofs | verdicts | blocking findings | upheld | overturned | no review read |",
        "|---|---|---|---|---|---|",
    ]
    for name, pooled in (("graded 7", correct), ("graded below 7", flawed)):
        lines.append(
            f"| {name} | {pooled['verdicts']} | {pooled['findings']} | {pooled['upheld']} | "
            f"{pooled['overturned']} | {pooled['unread']} |"
        )
    false_share = figures["false_share_on_flawed"]
    lines += [
        "",
        "- false findings rejected (on proofs graded 7, every blocking finding is false): "
        + _percent(figures["reject_false"]),
        "- findings upheld on proofs graded below 7: " + _percent(figures["upheld_on_flawed"]),
        "- of those findings, taken to be false (at the rate of proofs graded 7): "
        + _percent(false_share),
        "- real findings confirmed (what is upheld beyond the false ones): "
        + _percent(figures["confirm_real"]),
        "",
    ]
    return lines


def calibration_figures(rows: list[dict[str, Any]], per_variant: int) -> dict[str, Any]:
    """The verifier, reviewer and selector figures of the items' records (each None where the
    calibration asked for none), for calibration.json, its markdown and the command's last
    lines alike."""
    verifiers = verifier_figures(rows, per_variant)
    return {
        "verifiers": verifiers,
        "reviewers": reviewer_figures(rows) if verifiers is not None else None,
        "selectors": selector_figures(rows),
    }


def verification_lines(figures: dict[str, Any]) -> list[str]:
    """The figures of :func:`calibration_figures` in a line each, for the command's last
    words (none without verifications or comparisons)."""
    selectors = figures["selectors"]
    chosen = (
        []
        if selectors is None
        else [
            f"selector: chose the proof humans graded higher in {selectors['chose_higher']} "
            f"of {selectors['choices']} choices ({_percent(selectors['higher_share'])})"
        ]
    )
    verifiers = figures["verifiers"]
    if verifiers is None:
        return chosen
    variants = verifiers["variants"].values()
    on_correct = sum(v["verifications_of_correct"] for v in variants)
    fails = sum(
        round((v["fails_on_correct"] or 0) * v["verifications_of_correct"]) for v in variants
    )
    hidden, judged = verifiers["hidden_count"]
    lines = [
        f"verifiers: {fails} fails in {on_correct} verdicts on proofs graded 7; "
        f"{hidden} of {judged} flawed proofs hidden from every variant"
    ]
    reviewers = figures["reviewers"]
    # each share is None exactly when no review decided a finding of its kind of proof
    undecided = reviewers is not None and (
        reviewers["reject_false"] is None and reviewers["upheld_on_flawed"] is None
    )
    if undecided:
        lines.append("reviewer: no blocking finding was reviewed")
    elif reviewers is not None:
        lines.append(
            f"reviewer: overturned {_percent(reviewers['reject_false'])} of the false findings, "
            f"confirmed {_percent(reviewers['confirm_real'])} of the real ones"
        )
    return [*lines, *chosen]


def _selector_lines(figures: dict[str, Any]) -> list[str]:
    made = figures["choices"]
    return [
        "## Selector",
        "",
        f"{figures['comparisons']} pair(s) of proofs of one problem that humans graded "
        f"differently, each compared both ways by the pairwise selector "
        f"({made} of {figures['calls']} calls gave a choice).",
        "",
        f"- chose the proof humans graded higher: {_percent(figures['higher_share'])} "
        f"({figures['chose_higher']}/{made})",
        f"- chose the proof shown first: {_percent(_share(figures['chose_first'], made))} "
        f"({figures['chose_first']}/{made})",
        f"- both orders chose the same proof: {figures['orders_agree']} of "
        f"{figures['both_orders']} pairs",
        "",
    ]


def write_calibration(
    out_dir: Path,
    header: dict[str, Any],
    agreed: Agreement | None,
    rows: list[dict[str, Any]],
    figures: dict[str, Any],
) -> tuple[Path, Path]:
    """calibration.json and calibration.md, with the ``figures`` of :func:`calibration_figures`."""
    verifiers, reviewers, selectors = (
        figures["verifiers"],
        figures["reviewers"],
        figures["selectors"],
    )
    data = {
        "format": CALIBRATION_FORMAT,
        **header,
        "agreement": agreed.to_json() if agreed else None,
        "by_aggregation": {
            how: a.to_json() if a else None for how, a in agreement_by_aggregation(rows).items()
        },
        **figures,
        "items": rows,
    }
    json_path, md_path = out_dir / "calibration.json", out_dir / "calibration.md"
    write_atomic(json_path, json.dumps(data, indent=2, sort_keys=True).encode() + b"\n")
    markdown = calibration_markdown(
        header["input"]["path"],
        header["graders"],
        agreed,
        rows,
        verifiers,
        reviewers,
        selectors,
    )
    write_atomic(md_path, markdown.encode())
    return json_path, md_path
