"""The lab's parameters from a calibration on the target model (``--calibration FILE``).

``solver eval calibrate FILE --verifications N`` verifies proofs that humans graded with each
verifier variant and writes ``calibration.json`` (docs/eval.md). Three of its figures are lab
parameters of the role, the same on every problem, and are taken as measured:

- ``false_alarm``: the share of verdicts on proofs humans graded 7 that fail them, pooled over
  the variants (the lab's raw rate, before any review);
- ``no_verdict``: the share of verification calls that gave no verdict;
- ``variant_correlation``: ``mean_blind_correlation``, the correlation of the variants' blind
  spots over the flawed proofs, held to the lab's range 0 to 1.

The others are reported beside the lab's values and not applied: ``fails_on_flawed`` mixes
the lab's ``detect`` with how many flaws each proof has, and the blind shares are the lab's
``p_hidden`` of the problems calibrated on, which are not the lab's six.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solver.store import UnsafeEntry, read_regular

CALIBRATION_FORMAT = "solver-calibration/1"  # solver.evaluation.calibrate writes it
# calibration.json holds every item's record; a few hundred items is a few MB.
MAX_CALIBRATION_BYTES = 64 << 20


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
    """The verifier figures of a ``calibration.json``; ValueError, saying what is wrong, for a
    file that is not one or holds no verifications."""
    try:
        data = json.loads(read_regular(path, MAX_CALIBRATION_BYTES))
    except (OSError, UnsafeEntry) as exc:
        raise ValueError(f"{path}: cannot be read ({exc})") from None
    except ValueError:
        raise ValueError(f"{path}: not JSON") from None
    if not isinstance(data, dict) or data.get("format") != CALIBRATION_FORMAT:
        raise ValueError(f"{path}: not a calibration.json of format {CALIBRATION_FORMAT}")
    figures = data.get("verifiers")
    if figures is None:
        raise ValueError(
            f"{path}: holds no verifications; run solver eval calibrate with --verifications N"
        )
    if not isinstance(figures, dict) or not isinstance(figures.get("variants"), dict):
        raise ValueError(f"{path}: its verifiers are not of format {CALIBRATION_FORMAT}")
    return figures


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
            f"{fails_on_correct} fails in {on_correct} verdicts on {correct} proofs graded 7"
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
            f"the mean over {defined} pairs of variants ({names}) on {flawed} flawed proofs"
            if correlation is not None
            else f"needs two flawed proofs on which the variants' blind spots differ; "
            f"{flawed} flawed proofs",
        )
    )
    hidden = figures.get("hidden_count")
    if isinstance(hidden, list) and len(hidden) == 2 and hidden[1]:
        part, whole = int(hidden[0]), int(hidden[1])
        out.append(
            Measured(
                "hidden from every variant",
                part / whole,
                f"{part} of {whole} flawed proofs (the lab's p_hidden is per problem: "
                "P1 0.02 to P6 0.3)",
                wilson(part, whole),
                applied=False,
            )
        )
    return out


def lab_moves(path: Path) -> tuple[list[tuple[str, float]], list[str]]:
    """The ``--lab`` moves a calibration gives (name, value) and the lines that say where each
    comes from; ValueError, saying what is wrong, for a file that cannot give them."""
    figures = read_calibration(path)
    try:
        found = measured(figures)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    moves = [(m.name, m.value) for m in found if m.applied and m.value is not None]
    lines = [f"lab parameters from the calibration {path.name}:", *(m.line() for m in found)]
    return moves, lines
