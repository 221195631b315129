"""The lab's parameters from measurements on the target model: a calibration of its verifier
(``--calibration FILE``) and a benchmark of its server (``--serve-bench FILE``).

``solver eval calibrate FILE --verifications N`` verifies proofs that humans graded with each
verifier variant, reviews their findings as the loop does, and writes ``calibration.json``
(docs/eval.md). Three of its verifier figures are lab parameters of the role, the same on
every problem, and are taken as measured, and so are one of the grader and two of the
reviewer from the same file:

- ``false_alarm``: the share of verdicts on proofs humans graded 7 that fail them, pooled over
  the variants (the lab's raw rate, before any review);
- ``no_verdict``: the share of verification calls that gave no verdict;
- ``variant_correlation``: ``mean_blind_correlation``, the correlation of the variants' blind
  spots over the flawed proofs, held to the lab's range 0 to 1;
- ``grader_noise``: twice the share of 6s among the graders' first grades of proofs humans
  graded 7 (the lab's grader slips by one either way, and on a 7 only the slip down shows);
- ``review_reject_false``: of the blocking findings on proofs humans graded 7 (all false)
  that a review decided, the share it overturned;
- ``review_confirm_real``: of the blocking findings on flawed proofs, what the reviews upheld
  beyond the false findings expected there at the rate of proofs graded 7 (the lab's verifier
  raises its false alarms at one rate whatever the proof's flaws);
- ``selector_accuracy`` (with ``--comparisons``): ``2 w - 1``, where ``w`` is the share of
  the pairwise selector's choices that took the proof humans graded higher. The lab's
  selector picks the better proof as it reads them with that accuracy and else a coin, so a
  selector that reads both right wins ``(1 + a) / 2``; a misread proof also costs wins,
  which the lab draws apart (a judge of the run's family misses what its verifiers miss), so
  the value is a lower bound.

The others are reported beside the lab's values and not applied: ``fails_on_flawed`` mixes
the lab's ``detect`` with how many flaws each proof has, and the blind shares are the lab's
``p_hidden`` of the problems calibrated on, which are not the lab's six.

``solver serve bench --out FILE`` measures the median per-user decode rate at each concurrency.
The lab's GPU (``solver.testing.virtual_gpu.GpuModel``) slows each of ``c`` calls in flight to
``decode_tok_s / (1 + (c - 1) / saturation)``, so ``1 / rate`` is linear in ``c - 1``: a least
squares line through the levels gives ``decode_tok_s`` (its intercept) and ``saturation`` (the
intercept over the slope), and each level's fitted rate is printed beside the measured one.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solver.evaluation.calibrate import CALIBRATION_FORMAT
from solver.evaluation.calibration_figures import confirmed_real, false_share
from solver.store import UnsafeEntry, read_regular

# calibration.json holds every item's record; a few hundred items is a few MB.
MAX_CALIBRATION_BYTES = 64 << 20
# a serve bench summary is a few kB a level
MAX_SERVE_BENCH_BYTES = 16 << 20


@dataclass(frozen=True)
class Measured:
    """One figure of a calibration: the lab parameter it sets (None: reported only), its
    value, the count behind it and a 95% interval where it is a share."""

    name: str
    value: float | None
    basis: str
    interval: tuple[float, float] | None = None
    applied: bool = True

    def line(self) -> str:
        if self.value is None:
            return f"  {self.name}: not measured ({self.basis}); the lab's centre stays"
        shown = f"{self.value:.3f}"
        if self.interval is not None:
            shown += f" [{self.interval[0]:.3f}, {self.interval[1]:.3f}]"
        use = "" if self.applied else " (reported, not applied)"
        return f"  {self.name} = {shown}{use}, from {self.basis}"


def wilson(part: int, whole: int) -> tuple[float, float]:
    """The 95% Wilson score interval of a share ``part / whole`` (``whole`` > 0): it stays
    inside 0 to 1 and is honest for the few dozen verdicts a calibration has."""
    z = 1.959964
    share = part / whole
    centre = (share + z * z / (2 * whole)) / (1 + z * z / whole)
    half = z * math.sqrt(share * (1 - share) / whole + z * z / (4 * whole * whole))
    half /= 1 + z * z / whole
    return max(0.0, centre - half), min(1.0, centre + half)


def read_calibration(path: Path) -> dict[str, Any]:
    """A ``calibration.json`` whose verifier or selector figures are present; ValueError,
    saying what is wrong, for a file that is not one or holds neither."""
    data = _read_json(path, MAX_CALIBRATION_BYTES)
    if not isinstance(data, dict) or data.get("format") != CALIBRATION_FORMAT:
        raise ValueError(f"{path}: not a calibration.json of format {CALIBRATION_FORMAT}")
    figures = data.get("verifiers")
    if figures is None and data.get("selectors") is None:
        raise ValueError(
            f"{path}: holds no verifications; run solver eval calibrate with --verifications N"
            " (and --comparisons for the selector)"
        )
    if figures is None:
        return data
    if not isinstance(figures, dict) or not isinstance(figures.get("variants"), dict):
        raise ValueError(f"{path}: its verifiers are not of format {CALIBRATION_FORMAT}")
    return data


def _count(variant: dict[str, Any], key: str) -> int:
    value = variant.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{key} is not a count: {value!r}")
    return value


def _share(variant: dict[str, Any], key: str) -> float:
    value = variant.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 1:
        raise ValueError(f"{key} is not a share: {value!r}")
    return float(value)


def _proofs(count: int, kind: str = "") -> str:
    return f"{count} {kind}proof" + ("" if count == 1 else "s")


def measured(figures: dict[str, Any]) -> list[Measured]:
    """What the calibration's verifier figures say of the lab's parameters, in the order they
    are applied; ValueError for figures out of their ranges."""
    variants = list(figures["variants"].values())
    if not all(isinstance(v, dict) for v in variants):
        raise ValueError("a verifier variant's figures are not an object")
    on_correct = sum(_count(v, "verifications_of_correct") for v in variants)
    on_flawed = sum(_count(v, "verifications_of_flawed") for v in variants)
    # a share times its count is the count it was taken from (calibrate divides exactly)
    fails_on_correct = sum(
        round(_share(v, "fails_on_correct") * _count(v, "verifications_of_correct"))
        for v in variants
        if v.get("fails_on_correct") is not None
    )
    silent = sum(_count(v, "no_verdict") for v in variants)
    calls = on_correct + on_flawed + silent
    correct = figures.get("correct_proofs", 0)
    flawed = figures.get("flawed_proofs", 0)
    names = ", ".join(figures["variants"])
    out = [
        Measured(
            "false_alarm",
            fails_on_correct / on_correct if on_correct else None,
            f"{fails_on_correct} fails in {on_correct} verdicts on {_proofs(correct)} graded 7"
            if on_correct
            else "no verdict on a proof humans graded 7",
            wilson(fails_on_correct, on_correct) if on_correct else None,
        ),
        Measured(
            "no_verdict",
            silent / calls if calls else None,
            f"{silent} of {calls} verification calls" if calls else "no verification call",
            wilson(silent, calls) if calls else None,
        ),
    ]
    correlation = figures.get("mean_blind_correlation")
    if correlation is not None and not isinstance(correlation, (int, float)):
        raise ValueError(f"mean_blind_correlation is not a number: {correlation!r}")
    defined = sum(r is not None for r in (figures.get("blind_correlation") or {}).values())
    out.append(
        Measured(
            "variant_correlation",
            None if correlation is None else min(max(float(correlation), 0.0), 1.0),
            f"the mean over {defined} pairs of variants ({names}) on {_proofs(flawed, 'flawed ')}"
            if correlation is not None
            else f"needs two flawed proofs on which the variants' blind spots differ; "
            f"{_proofs(flawed, 'flawed ')}",
        )
    )
    hidden = figures.get("hidden_count")
    if isinstance(hidden, list) and len(hidden) == 2 and hidden[1]:
        part, whole = int(hidden[0]), int(hidden[1])
        out.append(
            Measured(
                "hidden from every variant",
                part / whole,
                f"{part} of {_proofs(whole, 'flawed ')} (the lab's p_hidden is per problem: "
                "P1 0.02 to P6 0.3)",
                wilson(part, whole),
                applied=False,
            )
        )
    return out


def _grade(value: Any, what: str) -> int | None:
    """A 0-7 grade, None where none was read; ValueError for anything else."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 7:
        raise ValueError(f"{what} is not a grade from 0 to 7: {value!r}")
    return round(value)


def grader_measured(items: Any) -> Measured:
    """``grader_noise`` from the first grades of the proofs humans graded 7. The lab's grader
    moves a grade by one either way with that probability and holds it to 0-7, so on a
    correct proof half its slips show, as a 6: the noise is twice the share of 6s. A grade two
    or more below is no slip of the lab's kind; it is counted apart and left out."""
    if not isinstance(items, list):
        raise ValueError("the calibration's items are not a list")
    grades: list[int] = []
    for row in items:
        if not isinstance(row, dict):
            raise ValueError("a calibration item is not an object")
        scores = row.get("grader_scores") or []
        if not isinstance(scores, list):
            raise ValueError("an item's grader_scores is not a list")
        if _grade(row.get("human"), "an item's human grade") != 7:
            continue
        read = (_grade(score, "a grader's score") for score in scores)
        grades.extend(grade for grade in read if grade is not None)
    if not grades:
        return Measured("grader_noise", None, "no grade of a proof humans graded 7")
    slips, far = grades.count(6), sum(1 for grade in grades if grade < 6)
    whole = slips + grades.count(7)
    beyond = f"; {far} more than one below, left out" if far else ""
    if not whole:
        return Measured("grader_noise", None, f"no grade within one of 7{beyond}")
    low, high = wilson(slips, whole)
    return Measured(
        "grader_noise",
        min(2 * slips / whole, 1.0),
        f"twice the {slips} grades of 6 in {whole} grades of proofs humans graded 7{beyond}",
        (min(2 * low, 1.0), min(2 * high, 1.0)),
    )


_REVIEW_COUNTS = ("verdicts", "findings", "upheld", "overturned")


def _pooled(figures: dict[str, Any], key: str) -> dict[str, int]:
    pooled = figures.get(key)
    if not isinstance(pooled, dict):
        raise ValueError(f"the reviewers' {key} is not an object")
    counts = {name: _count(pooled, name) for name in _REVIEW_COUNTS}
    if counts["upheld"] + counts["overturned"] > counts["findings"]:
        raise ValueError(f"the reviewers' {key} decides more findings than it has")
    return counts


def reviewer_measured(figures: Any) -> list[Measured]:
    """``review_reject_false`` and ``review_confirm_real`` from the calibration's reviewer
    counts (recomputed from the counts, not read from its shares). On a flawed proof a
    share ``f`` of the decided findings is taken to be false, ``f`` = the findings per
    verdict on proofs graded 7 times the flawed proofs' verdicts over their findings; their
    upheld share ``u`` is then ``c (1 - f) + (1 - r) f``, which gives ``c``. Its interval is
    that of ``u`` carried through the same line, holding ``f`` and ``r`` fixed."""
    names = ("review_reject_false", "review_confirm_real")
    if figures is None:
        why = (
            "the calibration has no reviews: it was made without --verifications, "
            "or before reviews were recorded"
        )
        return [Measured(name, None, why) for name in names]
    if not isinstance(figures, dict):
        raise ValueError("the calibration's reviewers are not an object")
    correct, flawed = _pooled(figures, "on_correct"), _pooled(figures, "on_flawed")
    decided = correct["upheld"] + correct["overturned"]
    if not decided:
        why = "no review decided a finding on a proof humans graded 7"
        return [Measured(name, None, why) for name in names]
    rejected = correct["overturned"]
    reject = rejected / decided
    out = [
        Measured(
            "review_reject_false",
            reject,
            f"{rejected} of {decided} blocking findings on proofs graded 7 overturned",
            wilson(rejected, decided),
        )
    ]
    on_flawed = flawed["upheld"] + flawed["overturned"]
    false = false_share(correct, flawed) if correct["verdicts"] and on_flawed else 1.0
    if not on_flawed or false >= 1.0:
        why = (
            "no review decided a finding on a flawed proof"
            if not on_flawed
            else "the flawed proofs' findings are no more than the false alarms expected there"
        )
        return [*out, Measured("review_confirm_real", None, why)]

    def confirm(upheld: float) -> float:
        return confirmed_real(upheld, reject, false)

    low, high = wilson(flawed["upheld"], on_flawed)
    basis = (
        f"{flawed['upheld']} of {on_flawed} blocking findings on flawed proofs upheld, "
        f"{false:.0%} of them taken as false alarms"
    )
    value = confirm(flawed["upheld"] / on_flawed)
    return [*out, Measured("review_confirm_real", value, basis, (confirm(low), confirm(high)))]


def selector_measured(figures: Any) -> Measured:
    """``selector_accuracy`` from the calibration's comparisons (module docstring)."""
    if figures is None:
        why = "the calibration made no comparison (solver eval calibrate --comparisons)"
        return Measured("selector_accuracy", None, why)
    if not isinstance(figures, dict):
        raise ValueError("the calibration's selectors are not an object")
    made, higher = _count(figures, "choices"), _count(figures, "chose_higher")
    if higher > made:
        raise ValueError("the calibration's selectors chose the higher more often than they chose")
    if not made:
        return Measured("selector_accuracy", None, "no comparison gave a choice")
    low, high = wilson(higher, made)
    return Measured(
        "selector_accuracy",
        max(2 * higher / made - 1, 0.0),
        f"{higher} of {made} choices took the proof humans graded higher (2 w - 1)",
        (max(2 * low - 1, 0.0), max(2 * high - 1, 0.0)),
    )


def lab_moves(path: Path) -> tuple[list[tuple[str, float]], list[str]]:
    """The ``--lab`` moves a calibration gives (name, value) and the lines that say where each
    comes from; ValueError, saying what is wrong, for a file that cannot give them."""
    data = read_calibration(path)
    figures = data.get("verifiers")
    try:
        found = [
            *(measured(figures) if figures is not None else []),
            grader_measured(data.get("items", [])),
            *reviewer_measured(data.get("reviewers")),
            selector_measured(data.get("selectors")),
        ]
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    moves = [(m.name, m.value) for m in found if m.applied and m.value is not None]
    lines = [f"lab parameters from the calibration {path.name}:", *(m.line() for m in found)]
    return moves, lines


def _read_json(path: Path, limit: int) -> Any:
    try:
        return json.loads(read_regular(path, limit))
    except (OSError, UnsafeEntry) as exc:
        raise ValueError(f"{path}: cannot be read ({exc})") from None
    except ValueError:
        raise ValueError(f"{path}: not JSON") from None


def _rate(level: Any) -> tuple[int, float] | None:
    """A level's concurrency and median per-user decode rate, if it measured one."""
    if not isinstance(level, dict):
        raise ValueError("a level is not an object")
    concurrency, per_user = level.get("concurrency"), level.get("per_user_tok_s")
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise ValueError(f"a level's concurrency is not a positive count: {concurrency!r}")
    median = per_user.get("p50") if isinstance(per_user, dict) else None
    if median is None:
        return None
    if not isinstance(median, (int, float)) or isinstance(median, bool) or not median > 0:
        raise ValueError(f"a level's p50 per-user tok/s is not a positive rate: {median!r}")
    return concurrency, float(median)


def fit_gpu(rates: list[tuple[int, float]]) -> tuple[float, float]:
    """``decode_tok_s`` and ``saturation`` of the lab's GPU fitted to (concurrency, per-user
    rate) pairs by least squares on ``1 / rate = 1 / d + (c - 1) / (d * s)``; ValueError where
    the levels cannot give both (fewer than two concurrencies, or no slowdown with load)."""
    if len({c for c, _ in rates}) < 2:
        raise ValueError("needs the per-user rate at two concurrencies or more")
    xs = [c - 1.0 for c, _ in rates]
    ys = [1.0 / r for _, r in rates]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mean_x) ** 2 for x in xs
    )
    intercept = mean_y - slope * mean_x
    if intercept <= 0 or slope <= 0:
        alone = min(rates)[1]  # the rate at the lowest concurrency measured
        raise ValueError(
            "the per-user rate does not fall with concurrency as a batching GPU's does "
            f"(fitted 1/rate = {intercept:.4g} + {slope:.4g} (c - 1)); a server that queues "
            "requests instead of batching them keeps its rate and delays the first token: "
            f"if it runs one request at a time, say so with --lab slots=1 --lab "
            f"decode_tok_s={alone:.0f}"
        )
    return 1.0 / intercept, intercept / slope


def serve_bench_rates(path: Path) -> tuple[list[tuple[int, float]], int]:
    """The (concurrency, median per-user rate) of each level that measured one, of the first
    endpoint of a ``solver serve bench`` summary, and how many endpoints it has; ValueError,
    saying what is wrong, for a file that is not such a summary."""
    data = _read_json(path, MAX_SERVE_BENCH_BYTES)
    levels = data.get("levels") if isinstance(data, dict) else None
    endpoints = data.get("endpoints") if isinstance(data, dict) else None
    if not isinstance(levels, list) or not isinstance(endpoints, list) or not endpoints:
        raise ValueError(f"{path}: not a summary of solver serve bench (--out FILE)")
    first = endpoints[0]
    try:
        mine = [level for level in levels if isinstance(level, dict)]
        mine = [level for level in mine if level.get("endpoint") == first]
        return [rate for rate in map(_rate, mine) if rate is not None], len(endpoints)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def gpu_moves(path: Path) -> tuple[list[tuple[str, float]], list[str]]:
    """The ``--lab`` moves of the GPU a ``solver serve bench`` summary gives, and the lines
    that show the fit level by level; ValueError, saying what is wrong, for a file that
    cannot give them. Of several endpoints, the first is fitted."""
    return fitted_gpu(path, *serve_bench_rates(path))


def fitted_gpu(
    path: Path, rates: list[tuple[int, float]], endpoints: int
) -> tuple[list[tuple[str, float]], list[str]]:
    """``gpu_moves`` on the levels ``serve_bench_rates`` read from ``path``."""
    try:
        decode, saturation = fit_gpu(rates)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    others = f" (of {endpoints} endpoints, the first)" if endpoints > 1 else ""
    lines = [
        f"lab GPU from the serve bench {path.name}{others}: decode_tok_s = {decode:.1f}, "
        f"saturation = {saturation:.1f}; prefill_tok_s stays (a bench measures no prefill rate)",
        "  concurrency  p50 per-user tok/s  fitted",
        *(
            f"  {c:>11}  {rate:>18.1f}  {decode / (1 + (c - 1) / saturation):>6.1f}"
            for c, rate in sorted(rates)
        ),
    ]
    return [("decode_tok_s", decode), ("saturation", saturation)], lines
