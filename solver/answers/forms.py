"""Reading a short final answer into comparable pieces, for :mod:`solver.answers.check`.

An answer is a list of *pieces* (``2026, 2030`` has two; ``P(x)=-1, P(x)=x+1`` has two) plus
an optional *condition* (``for some a > 0``). A piece is a scalar expression, a tuple, a set of
reals (intervals, unions, inequalities in one variable), a residue class (``odd n``,
``n = 4k+3``), the empty answer (``no solutions``) or, failing all of those, normalised text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

import sympy

from solver.answers.latex import to_sympy
from solver.answers.text import (
    FILLER_WORDS,
    LatexError,
    has_words,
    normalise,
    split_condition,
    split_top,
    text_key,
)

PieceKind = Literal["expr", "tuple", "set", "residue", "empty", "text"]

MAX_ANSWER_CHARS = 600
MAX_RANGE = 10_000


@dataclass(frozen=True)
class Piece:
    kind: PieceKind
    expr: sympy.Expr | None = None
    items: tuple[sympy.Expr, ...] = ()
    real_set: sympy.Set | None = None
    residue: tuple[int, int] | None = None
    text: str = ""
    variable: str = ""  # the variable of an inequality ("n" in "n >= 2")


@dataclass(frozen=True)
class Answer:
    normalised: str
    pieces: tuple[Piece, ...]
    condition: str = ""
    notes: tuple[str, ...] = field(default=())


_LEADING_WORDS = re.compile(
    r"^(?:for\s+)?(?:all|every|any|each)\s+(?:(?:positive\s+|real\s+)?"
    r"(?:integers?|numbers?|reals?)\s+)?",
    re.IGNORECASE,
)


_EMPTY = re.compile(
    r"^(?:none|no\s+(?:solutions?|such\s+\w+(?:\s+\w+)?|\w+\s+exists?|positive\s+integers|"
    r"integers|values?|\w+)|there\s+(?:is|are)\s+(?:none|no\s+\w+(?:\s+\w+)?)|\\emptyset|\\varnothing|"
    r"\\\{\s*\\\}|empty\s+set|the\s+empty\s+set)$",
    re.IGNORECASE,
)
_RESIDUE_FORM = re.compile(
    r"^(?:[a-z](?:_\w+)?\s*=\s*)?(\d+)\s*\\?(?:cdot\s*)?\*?\s*[a-z]\s*([+-])\s*(\d+)$"
)
_RESIDUE_ZERO = re.compile(r"^(?:[a-z](?:_\w+)?\s*=\s*)?(\d+)\s*\*?\s*[a-z]$")
_CONGRUENCE = re.compile(
    r"^(?:[a-z]\s*)?\\equiv\s*(-?\d+)\s*\(?\s*\\?(?:pmod|bmod|mod)\s*\{?\s*(\d+)\s*\}?\s*\)?$"
)


def residue_class(text: str) -> tuple[int, int] | None:
    """``odd``/``even``/``4k+3``/``n \\equiv 3 \\pmod 4`` -> (modulus, residue)."""
    lowered = text.lower().strip()
    words = set(re.findall(r"[a-z]+", lowered))
    spare = words - FILLER_WORDS - {"odd", "even", "integers", "numbers"}
    if words & {"odd", "even"} and not spare:
        if "odd" in words and "even" not in words:
            return (2, 1)
        if "even" in words and "odd" not in words:
            return (2, 0)
    # "4k+3" alone is an expression; it names a class only as "n = 4k+3" or "of the form".
    has_form = re.search(r"\bform\b", lowered) is not None
    core = re.sub(r"^.*\bform\b\s*", "", lowered).strip()
    core = re.sub(r"^(?:all|every)\s+(?:integers|numbers)?\s*", "", core).strip()
    assigned = re.match(r"^([a-z])(?:_\w+)?\s*=\s*\d+\s*\*?\s*([a-z])\b", core)
    if has_form or (assigned is not None and assigned.group(1) != assigned.group(2)):
        match = _RESIDUE_FORM.match(core)
        if match:
            modulus = int(match.group(1))
            offset = int(match.group(3)) * (1 if match.group(2) == "+" else -1)
            return (modulus, offset % modulus) if modulus > 0 else None
        match = _RESIDUE_ZERO.match(core)
        if match and int(match.group(1)) > 1:
            return (int(match.group(1)), 0)
    match = _CONGRUENCE.match(core)
    if match and int(match.group(2)) > 0:
        return (int(match.group(2)), int(match.group(1)) % int(match.group(2)))
    return None


_INTERVAL = re.compile(r"^([(\[])(.+),(.+)([)\]])$")


def _interval(text: str) -> sympy.Set | None:
    match = _INTERVAL.match(text)
    if match is None or len(split_top(text[1:-1])) != 2:
        return None
    left_open = match.group(1) == "("
    right_open = match.group(4) == ")"
    low_text, high_text = split_top(text[1:-1])
    if left_open and right_open and "infty" not in text:
        return None  # "(a, b)" is read as a pair; the comparison may reread it as an interval
    low, high = to_sympy(low_text), to_sympy(high_text)
    if low.free_symbols or high.free_symbols:
        return None
    return sympy.Interval(low, high, left_open, right_open)


def _finite_set(text: str) -> sympy.Set | None:
    if not (text.startswith("\\{") and text.endswith("\\}")):
        return None
    inner = text[2:-2]
    if ":" in inner or "|" in inner or "\\mid" in inner:
        return None
    values = [to_sympy(item) for item in split_top(inner)]
    if any(value.free_symbols for value in values):
        return None
    return sympy.FiniteSet(*values)


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += (char in "([{") - (char in ")]}")
        if depth < 0:
            return False
    return depth == 0


def _inequality_set(text: str) -> tuple[sympy.Set, str] | None:
    parts = re.split(r"\s*(<=|>=|<|>)\s*", text)
    if len(parts) < 3 or len(parts) % 2 == 0 or not all(_balanced(p) for p in parts[0::2]):
        return None
    values = [to_sympy(part) for part in parts[0::2]]
    symbols = set().union(*(value.free_symbols for value in values))
    if len(symbols) != 1:
        return None
    variable = next(iter(symbols))
    if not isinstance(variable, sympy.Symbol):
        return None
    result: sympy.Set = sympy.S.Reals
    operators = {"<=": sympy.Le, ">=": sympy.Ge, "<": sympy.Lt, ">": sympy.Gt}
    for index, operator in enumerate(parts[1::2]):
        relation = operators[operator](values[index], values[index + 1])
        result = result.intersect(relation.as_set())
    return result, variable.name


def _union(text: str) -> sympy.Set | None:
    members = [m.strip() for m in re.split(r"\\cup(?![A-Za-z])", text)]
    if len(members) < 2:
        return None
    result: sympy.Set = sympy.S.EmptySet
    for member in members:
        part = _interval(member) or _finite_set(member)
        if part is None and member.startswith("(") and member.endswith(")"):
            pair = split_top(member[1:-1])
            if len(pair) == 2:
                part = sympy.Interval.open(to_sympy(pair[0]), to_sympy(pair[1]))
        if part is None:
            return None
        result = result.union(part)
    return result


def _strip_label(text: str) -> str:
    """``P(x) = ...``, ``f(x,y) = ...`` and ``n = ...`` -> the right-hand side."""
    match = re.match(r"^([A-Za-z](?:_\{?\w+\}?)?)\s*(?:\(([^()=]*)\))?\s*=\s*(.+)$", text)
    if match is None or "=" in match.group(3):
        return text
    return match.group(3)


_INTEGER = re.compile(r"[+-]?\d{1,400}")
_MEMBERSHIP = re.compile(r"^[A-Za-z](?:_\w+)?\s*\\in(?![A-Za-z])\s*(.+)$")


def read_piece(text: str) -> Piece:
    if _INTEGER.fullmatch(text):
        return Piece("expr", expr=sympy.Integer(text))
    if _EMPTY.match(text):
        return Piece("empty")
    residue = residue_class(text)
    if residue is not None:
        return Piece("residue", residue=residue)
    member = _MEMBERSHIP.match(text)
    if member is not None:
        text = member.group(1)
    stripped = _LEADING_WORDS.sub("", text)
    if stripped != text and stripped and not has_words(stripped):
        text = stripped
    if has_words(text.replace("\\mathbb", "")):
        return Piece("text", text=text_key(text))
    try:
        real_set = _union(text) or _interval(text) or _finite_set(text)
        if real_set is not None:
            return Piece("set", real_set=real_set)
        if re.search(r"<=|>=|<|>", text):
            solved = _inequality_set(_strip_label(text))
            if solved is not None:
                return Piece("set", real_set=solved[0], variable=solved[1])
        body = _strip_label(text)
        if body.startswith("(") and body.endswith(")") and len(split_top(body[1:-1])) > 1:
            return Piece("tuple", items=tuple(to_sympy(item) for item in split_top(body[1:-1])))
        if body.startswith("\\{") and body.endswith("\\}"):
            return Piece("text", text=re.sub(r"\s+", "", body))
        return Piece("expr", expr=to_sympy(body))
    except (LatexError, ValueError, TypeError, NotImplementedError):
        return Piece("text", text=re.sub(r"\s+", "", text))


def _expand_ranges(items: list[str]) -> list[str] | None:
    """``1, 2, \\ldots, 9`` -> the integers; None if an ellipsis cannot be expanded."""
    if not any(item == "\\ldots" for item in items):
        return items
    out: list[str] = []
    for index, item in enumerate(items):
        if item != "\\ldots":
            out.append(item)
            continue
        try:
            first, second = int(items[index - 2]), int(items[index - 1])
            last = int(items[index + 1])
        except (IndexError, ValueError):
            return None
        step = second - first
        if step == 0 or (last - second) % step or not 0 < (last - second) // step < MAX_RANGE:
            return None
        out.extend(str(value) for value in range(second + step, last, step))
    return out


def read_answer(raw: str) -> Answer:
    normalised = normalise(raw)
    if len(normalised) > MAX_ANSWER_CHARS:
        return Answer(normalised, (Piece("text", text=normalised),), notes=("answer too long",))
    main, condition = split_condition(normalised)
    if _EMPTY.match(main):
        return Answer(normalised, (Piece("empty"),), text_key(condition))
    if main.startswith("\\{") and main.endswith("\\}") and _finite_set_like(main):
        main = main[2:-2]
    items = split_top(re.sub(r"\s+(?:and|or)\s+", ", ", main))
    expanded = _expand_ranges(items)
    if expanded is None:
        return Answer(normalised, (Piece("text", text=re.sub(r"\s+", "", main)),), condition)
    pieces: list[Piece] = []
    for item in expanded:
        plus_minus = _PLUS_MINUS.search(item)
        if plus_minus is not None:
            pieces.extend(read_piece(_PLUS_MINUS.sub(sign, item, count=1)) for sign in "+-")
        else:
            pieces.append(read_piece(item))
    definition = _definition(condition)
    if definition is not None:
        # "... where \varphi = (1+\sqrt5)/2": a definition, not a condition; substitute it.
        pieces = [_substitute(piece, definition) for piece in pieces]
        condition = ""
    return Answer(normalised, tuple(pieces), text_key(condition) if condition else "")


_DEFINITION = re.compile(r"^(?:where|with)\s+(\\?[A-Za-z]+(?:_\w+)?)\s*=\s*(.+)$", re.IGNORECASE)


def _definition(condition: str) -> dict[sympy.Basic, sympy.Basic] | None:
    match = _DEFINITION.match(condition.strip())
    if match is None:
        return None
    try:
        name, value = to_sympy(match.group(1)), to_sympy(match.group(2))
    except LatexError:
        return None
    if not isinstance(name, sympy.Symbol) or name in value.free_symbols:
        return None
    return {name: value}


def _substitute(piece: Piece, mapping: dict[sympy.Basic, sympy.Basic]) -> Piece:
    if piece.expr is not None:
        return Piece(piece.kind, expr=piece.expr.xreplace(mapping))
    if piece.items:
        return Piece(piece.kind, items=tuple(item.xreplace(mapping) for item in piece.items))
    return piece


_PLUS_MINUS = re.compile(r"\\pm(?![A-Za-z])")


def _finite_set_like(text: str) -> bool:
    inner = text[2:-2]
    return ":" not in inner and "\\mid" not in inner and "|" not in inner
