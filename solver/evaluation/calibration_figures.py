"""What a calibration's rows measure: agreement with the humans under each aggregation, and
with ``--verifications N`` how often each verifier variant fails a proof humans graded below 7
and one they graded 7, its blind spots (flawed proofs it passed every time), how far two
variants' blind spots coincide, the reviewers' and the selector's figures. These are the policy
lab's ``detect``, ``false_alarm``, ``p_hidden`` and ``variant_correlation``, measured on the
target model (docs/bench-policy.md).
"""

from __future__ import annotations

from typing import Any

from solver.evaluation.scores import FULL_GRADE, Agreement, agreement, pearson
from solver.loop.grading import AGGREGATIONS, aggregate


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
        "higher_share": share_of(higher, len(made)),
    }


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
    reject_false = share_of(correct["overturned"], decided_correct)
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
        "upheld_on_flawed": share_of(flawed["upheld"], decided_flawed),
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
            "fails_on_flawed": share_of(on_flawed.count("fail"), len(on_flawed)),
            "blind": share_of(int(sum(blind(row, name) for row in judged)), len(judged)),
            "verifications_of_correct": len(on_correct),
            "fails_on_correct": share_of(on_correct.count("fail"), len(on_correct)),
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
        "hidden_from_all": share_of(hidden, len(judged_by_all)),
        "hidden_count": [hidden, len(judged_by_all)],
        "blind_correlation": pairs,
        "mean_blind_correlation": sum(defined) / len(defined) if defined else None,
    }


def share_of(part: int, whole: int) -> float | None:
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
