"""`solver eval calibrate FILE`: grade proofs that humans already graded, and report agreement.

The file is read by :mod:`solver.evaluation.graded_file`, the grading runs planned and read by
:mod:`solver.evaluation.calibration_runs`, the figures computed by
:mod:`solver.evaluation.calibration_figures`; this module writes what they found:
calibration.json, calibration.md and the command's last lines. Agreement is reported for the
configured aggregation and, from the same recorded grades, for each of minimum, median and
mean, so choosing one needs no second grading.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from solver.evaluation.calibration_figures import (
    agreement_by_aggregation,
    share_of,
)
from solver.evaluation.calibration_runs import CalibrationPlan
from solver.evaluation.evaluate import JobResult
from solver.evaluation.scores import Agreement
from solver.evaluation.set_run import served_model
from solver.store import write_atomic

CALIBRATION_FORMAT = "solver-calibration/1"


def calibration_header(plan: CalibrationPlan, results: list[JobResult]) -> dict[str, Any]:
    """What the calibration is of: the input file, G and the model that graded."""
    return {
        "input": {"path": str(plan.file), "digest": plan.digest},
        "graders": plan.graders,
        "verifications": plan.verifications,
        "comparisons": plan.comparisons,
        "model": served_model(results),
    }


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
        f"- chose the proof shown first: {_percent(share_of(figures['chose_first'], made))} "
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
