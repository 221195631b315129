"""The final-answer check: is the answer in a proof the reference's short answer?

``check_answer(candidate, reference)`` says ``equivalent``, ``not_equivalent`` or ``undecided``
and why, for numbers, expressions, sets, tuples, intervals, inequalities, residue classes
("all odd n", "n = 4k+3") and LaTeX. It leans to ``undecided``: ``not_equivalent`` is said only
when both answers were read into comparable mathematical objects that provably differ (or
differ numerically at exact sample points); anything read as prose is only ever matched.

It never raises, and the sympy work is bounded: answers over 600 characters, powers with huge
exponents and huge expression trees are refused before evaluation, and the whole check runs in
a worker thread with a deadline (``undecided`` when it is missed).
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Literal

import sympy

from solver.answers.forms import Answer, Piece, read_answer
from solver.answers.text import answer_key, extract_final_answer

Verdict = Literal["equivalent", "not_equivalent", "undecided"]

DEFAULT_TIMEOUT_S = 10.0
_SAMPLE_POINTS = 6
_DIGITS = 40
_TOLERANCE = 1e-25
_SIMPLIFY_MAX_OPS = 60


@dataclass(frozen=True, slots=True)
class AnswerCheck:
    verdict: Verdict
    detail: str


# ---------------------------------------------------------------- extraction

# ---------------------------------------------------------------- comparison


_STEP_FUNCTIONS = (
    sympy.floor,
    sympy.ceiling,
    sympy.Abs,
    sympy.Max,
    sympy.Min,
    sympy.factorial,
    sympy.factorial2,
    sympy.binomial,
    sympy.frac,
)


def _is_zero(value: sympy.Expr) -> bool | None:
    """Exact where sympy can be exact, else by evalf (adaptive precision on the difference
    itself, so 2^2024+1 and 2^2024-1 differ); None when it cannot be evaluated."""
    if value.is_Rational:
        return bool(value == 0)
    try:
        number = sympy.N(value, _DIGITS)
    except (TypeError, ValueError, ArithmeticError):
        return None
    if number.free_symbols or number.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
        return None
    try:
        return bool(abs(complex(number)) < _TOLERANCE)
    except (TypeError, ValueError, OverflowError):
        return None


def _points(symbols: list[sympy.Symbol], integers: bool) -> list[dict[sympy.Symbol, sympy.Expr]]:
    generator = random.Random(20260101)  # fixed: the same pair always gets the same verdict
    points: list[dict[sympy.Symbol, sympy.Expr]] = []
    if integers:
        # Step functions (floor, factorial, ...) agree on rationals far more often than on
        # integers, where olympiad variables live: try small integers exhaustively first.
        if len(symbols) == 1:
            points.extend({symbols[0]: sympy.Integer(n)} for n in range(1, 41))
        else:
            points.extend(
                {symbol: sympy.Integer(generator.randint(1, 12)) for symbol in symbols}
                for _ in range(40)
            )
    points.extend(
        {
            symbol: sympy.Rational(generator.randint(1100, 3900), generator.randint(300, 999))
            for symbol in symbols
        }
        for _ in range(_SAMPLE_POINTS * 2)
    )
    return points


def _differ_numerically(
    left: sympy.Expr, right: sympy.Expr, symbols: set[sympy.Symbol]
) -> tuple[bool | None, int]:
    """(True, n) when the difference is nonzero at a sample point, (False, n) when it is zero
    at all n evaluable points (n >= 3), (None, n) when too few points could be evaluated."""
    difference = left - right
    if not symbols:
        zero = _is_zero(difference)
        return (None if zero is None else not zero), 1
    ordered = sorted(symbols, key=lambda symbol: symbol.name)
    integers = difference.has(*_STEP_FUNCTIONS)
    evaluated = 0
    for point in _points(ordered, integers):
        try:
            at_point = difference.xreplace(point)
        except (TypeError, ValueError, ArithmeticError):
            continue  # outside the domain (factorial2 of a fraction, ...)
        zero = _is_zero(at_point)
        if zero is None:
            continue
        evaluated += 1
        if not zero:
            return True, evaluated
    return (False if evaluated >= 3 else None), evaluated


def compare_expressions(
    left: sympy.Expr, right: sympy.Expr, known: frozenset[sympy.Basic] = frozenset()
) -> AnswerCheck:
    """``known``: symbols the reference answer uses anywhere (all its pieces); a candidate
    using only those is provably different when the values differ."""
    if left == right:
        return AnswerCheck("equivalent", "identical expressions")
    left_symbols, right_symbols = left.free_symbols, right.free_symbols
    symbols = {s for s in left_symbols | right_symbols if isinstance(s, sympy.Symbol)}
    differ, points = _differ_numerically(left, right, symbols)
    if differ is None:
        return AnswerCheck("undecided", f"could not evaluate {left} - {right}")
    if not differ:
        exact = False
        try:
            # Only to say how sure the verdict is; skipped where simplify could take long.
            if sympy.count_ops(left - right) <= _SIMPLIFY_MAX_OPS:
                exact = sympy.simplify(left - right) == 0
        except (TypeError, ValueError, RecursionError, NotImplementedError):
            exact = False
        how = "simplifies to 0" if exact else f"equal at {points} sample points"
        return AnswerCheck("equivalent", f"{_short(left)} = {_short(right)} ({how})")
    if left_symbols <= right_symbols | known:
        return AnswerCheck("not_equivalent", f"{_short(left)} != {_short(right)}")
    return AnswerCheck(
        "undecided",
        f"{_short(left)} != {_short(right)}, but the candidate uses other variables "
        f"({', '.join(sorted(map(str, left_symbols - right_symbols)))})",
    )


def _short(value: object, limit: int = 80) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _as_real_set(piece: Piece) -> sympy.Set | None:
    if piece.kind == "set":
        return piece.real_set
    if piece.kind == "expr" and piece.expr is not None and not piece.expr.free_symbols:
        return sympy.FiniteSet(piece.expr)
    if piece.kind == "tuple" and len(piece.items) == 2:
        low, high = piece.items
        if not low.free_symbols and not high.free_symbols:
            return sympy.Interval.open(low, high)
    if piece.kind == "empty":
        return sympy.S.EmptySet
    return None


def compare_pieces(
    left: Piece, right: Piece, known: frozenset[sympy.Basic] = frozenset()
) -> AnswerCheck:
    if left.kind == "expr" and right.kind == "expr":
        assert left.expr is not None and right.expr is not None
        return compare_expressions(left.expr, right.expr, known)
    if left.kind == "tuple" and right.kind == "tuple":
        if len(left.items) != len(right.items):
            return AnswerCheck("not_equivalent", "tuples of different lengths")
        results = [
            compare_expressions(a, b, known) for a, b in zip(left.items, right.items, strict=True)
        ]
        return _all_of(results, "tuple entries")
    if left.kind == "residue" and right.kind == "residue":
        same = left.residue == right.residue
        return AnswerCheck(
            "equivalent" if same else "not_equivalent",
            f"residue classes {left.residue} and {right.residue} (modulus, residue)",
        )
    if left.kind == "empty" and right.kind == "empty":
        return AnswerCheck("equivalent", "both say there is none")
    if left.kind == "text" and right.kind == "text":
        if left.text == right.text:
            return AnswerCheck("equivalent", f"same wording: {left.text!r}")
        return AnswerCheck("undecided", f"different wording: {left.text!r} vs {right.text!r}")
    if "set" in (left.kind, right.kind) or {left.kind, right.kind} == {"empty", "expr"}:
        left_set, right_set = _as_real_set(left), _as_real_set(right)
        if left_set is not None and right_set is not None:
            return compare_sets(left_set, right_set, _integer_context((left, right)))
    if "text" in (left.kind, right.kind):
        return AnswerCheck("undecided", "one answer could not be read as mathematics")
    return AnswerCheck("undecided", f"different kinds of answer: {left.kind} vs {right.kind}")


# Variables that name integers by convention: "n > 1" and "n >= 2" differ as sets of reals
# but not as sets of integers, and the problem (not the answer) says which is meant.
_INTEGER_NAMES = frozenset("nmkjilpqNMK")


def _integer_context(pieces: tuple[Piece, ...]) -> bool:
    return any(piece.variable in _INTEGER_NAMES for piece in pieces if piece.variable)


def _sets_equal(left: sympy.Set, right: sympy.Set) -> bool | None:
    if left == right:
        return True
    difference = sympy.SymmetricDifference(left, right).simplify()
    if difference == sympy.S.EmptySet or difference.is_empty:
        return True
    return False if difference.is_empty is False else None


def compare_sets(left: sympy.Set, right: sympy.Set, integer_context: bool = False) -> AnswerCheck:
    try:
        equal = _sets_equal(left, right)
        if equal:
            return AnswerCheck("equivalent", f"{_short(left)} = {_short(right)}")
        if equal is False and integer_context:
            integers = sympy.S.Integers
            on_integers = left.intersect(integers)
            # An answer with no integer in it is not about integers: the difference stands.
            if on_integers.is_empty is False and _sets_equal(
                on_integers, right.intersect(integers)
            ):
                return AnswerCheck(
                    "undecided",
                    f"{_short(left)} and {_short(right)} differ as sets of reals but agree on "
                    "the integers; the problem's domain decides",
                )
        if equal is False:
            return AnswerCheck("not_equivalent", f"{_short(left)} != {_short(right)}")
    except (TypeError, ValueError, NotImplementedError, RecursionError):
        pass
    return AnswerCheck("undecided", f"could not compare {_short(left)} with {_short(right)}")


def _all_of(results: list[AnswerCheck], what: str) -> AnswerCheck:
    if all(r.verdict == "equivalent" for r in results):
        return AnswerCheck("equivalent", f"all {what} agree")
    failed = [r for r in results if r.verdict == "not_equivalent"]
    if failed:
        return AnswerCheck("not_equivalent", failed[0].detail)
    return AnswerCheck("undecided", next(r.detail for r in results if r.verdict == "undecided"))


def _merge_sets(answer: Answer) -> sympy.Set | None:
    """All pieces as one set of reals, when the answer has an interval or inequality piece."""
    if not any(p.kind == "set" for p in answer.pieces):
        return None
    result: sympy.Set = sympy.S.EmptySet
    for piece in answer.pieces:
        part = _as_real_set(piece)
        if part is None:
            return None
        result = result.union(part)
    return result


def compare_answers(candidate: Answer, reference: Answer) -> AnswerCheck:
    main = _compare_main(candidate, reference)
    if main.verdict != "equivalent" or candidate.condition == reference.condition:
        return main
    return AnswerCheck(
        "undecided",
        f"{main.detail}; but the conditions differ: "
        f"{candidate.condition or '(none)'!r} vs {reference.condition or '(none)'!r}",
    )


def _compare_main(candidate: Answer, reference: Answer) -> AnswerCheck:
    if candidate.normalised == reference.normalised:
        return AnswerCheck("equivalent", "identical after normalisation")
    left_set, right_set = _merge_sets(candidate), _merge_sets(reference)
    if (left_set is not None) or (right_set is not None):
        left_set = left_set or _merge_any(candidate)
        right_set = right_set or _merge_any(reference)
        if left_set is not None and right_set is not None:
            pieces = (*candidate.pieces, *reference.pieces)
            return compare_sets(left_set, right_set, _integer_context(pieces))
    if len(candidate.pieces) == 1 and len(reference.pieces) == 1:
        return compare_pieces(candidate.pieces[0], reference.pieces[0])
    return _match_collections(candidate.pieces, reference.pieces, _symbols(reference))


def _symbols(answer: Answer) -> frozenset[sympy.Basic]:
    found: set[sympy.Basic] = set()
    for piece in answer.pieces:
        for expr in (piece.expr, *piece.items):
            if expr is not None:
                found |= expr.free_symbols
    return frozenset(found)


def _merge_any(answer: Answer) -> sympy.Set | None:
    result: sympy.Set = sympy.S.EmptySet
    for piece in answer.pieces:
        part = _as_real_set(piece)
        if part is None:
            return None
        result = result.union(part)
    return result


def _rational_values(pieces: tuple[Piece, ...]) -> set[sympy.Rational] | None:
    values: set[sympy.Rational] = set()
    for piece in pieces:
        if piece.kind != "expr" or piece.expr is None or not piece.expr.is_Rational:
            return None
        values.add(piece.expr)
    return values


def _match_collections(
    left: tuple[Piece, ...], right: tuple[Piece, ...], known: frozenset[sympy.Basic]
) -> AnswerCheck:
    """Order-free matching: every piece on each side has an equivalent on the other."""
    left_values, right_values = _rational_values(left), _rational_values(right)
    if left_values is not None and right_values is not None:
        # Lists of rationals (1, 2, ..., 1235): exact set comparison, no pairwise sympy work.
        if left_values == right_values:
            return AnswerCheck("equivalent", f"the same {len(right_values)} values")
        extra = sorted(left_values - right_values)[:5]
        missing = sorted(right_values - left_values)[:5]
        return AnswerCheck(
            "not_equivalent",
            f"values not in the reference: {extra}; reference values missing: {missing}",
        )
    unmatched_right = list(range(len(right)))
    missing_left: list[tuple[Piece, list[AnswerCheck]]] = []
    for piece in left:
        results = [(i, compare_pieces(piece, right[i], known)) for i in range(len(right))]
        hit = next((i for i, r in results if r.verdict == "equivalent"), None)
        if hit is None:
            missing_left.append((piece, [r for _, r in results]))
        elif hit in unmatched_right:
            unmatched_right.remove(hit)
    missing_right: list[list[AnswerCheck]] = []
    for index in unmatched_right:
        results_right = [compare_pieces(piece, right[index], known) for piece in left]
        if not any(r.verdict == "equivalent" for r in results_right):
            missing_right.append(results_right)
    if not missing_left and not missing_right:
        return AnswerCheck("equivalent", f"the same {len(right)} answers, in any order")
    definite = all(
        r.verdict == "not_equivalent"
        for results in [*(rs for _, rs in missing_left), *missing_right]
        for r in results
    )
    readable = all(p.kind in ("expr", "tuple", "residue", "empty") for p in (*left, *right))
    if definite and readable:
        message = f"{len(missing_left)} answer(s) of the candidate are not in the reference"
        if not missing_left:
            message = f"{len(missing_right)} answer(s) of the reference are missing"
        return AnswerCheck("not_equivalent", message)
    return AnswerCheck("undecided", "the answers could not all be matched")


# ---------------------------------------------------------------- entry point


def _check(candidate: str, reference: str) -> AnswerCheck:
    if not candidate.strip():
        return AnswerCheck("undecided", "the candidate has no answer")
    if not reference.strip():
        return AnswerCheck("undecided", "the reference has no answer")
    left, right = read_answer(candidate), read_answer(reference)
    return compare_answers(left, right)


def check_answer(
    candidate: str, reference: str, *, timeout_s: float = DEFAULT_TIMEOUT_S
) -> AnswerCheck:
    """Compare a proof's final answer with the reference answer. Never raises."""
    outcome: list[AnswerCheck] = []

    def work() -> None:
        try:
            outcome.append(_check(candidate, reference))
        except Exception as exc:  # a sympy corner we did not foresee is "undecided", not a crash
            outcome.append(AnswerCheck("undecided", f"check failed: {type(exc).__name__}"))

    worker = threading.Thread(target=work, name="answer-check", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if not outcome:
        return AnswerCheck("undecided", f"the check did not finish within {timeout_s:g} s")
    return outcome[0]


__all__ = [
    "AnswerCheck",
    "Verdict",
    "answer_key",
    "check_answer",
    "extract_final_answer",
]
