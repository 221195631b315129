"""Answers as text, without sympy: finding the final answer a proof states, normalising it,
and the quick key the loop's policy compares answers by.

Kept apart from :mod:`solver.answers.forms` and :mod:`solver.answers.check` because those load
sympy (about a second), and a run compares answers on every decision while only a run with a
reference answer ever needs the mathematical check.
"""

from __future__ import annotations

import re
import unicodedata


class LatexError(ValueError):
    """The text is not a math expression this module can read."""


_UNICODE = {
    "≤": r"\le ",
    "≥": r"\ge ",
    "≠": r"\ne ",
    "−": "-",
    "–": "-",
    "×": r"\times ",
    "·": r"\cdot ",
    "⋅": r"\cdot ",
    "∞": r"\infty ",
    "π": r"\pi ",
    "√": r"\sqrt",
    "∪": r"\cup ",
    "∈": r"\in ",
    "∅": r"\emptyset ",
    "…": r"\ldots ",
    "≡": r"\equiv ",
    "ℤ": r"\mathbb{Z}",
    "ℕ": r"\mathbb{N}",
    "ℝ": r"\mathbb{R}",
    "α": r"\alpha ",
    "β": r"\beta ",
    "γ": r"\gamma ",
    "δ": r"\delta ",
    "θ": r"\theta ",
    "λ": r"\lambda ",
    "μ": r"\mu ",
    "ρ": r"\rho ",
    "σ": r"\sigma ",
    "φ": r"\varphi ",
    "ϕ": r"\phi ",
    "ω": r"\omega ",
}
_RELATIONS = [
    (re.compile(r"\\(?:leq?slant|leq|le)(?![A-Za-z])"), "<="),
    (re.compile(r"\\(?:geq?slant|geq|ge)(?![A-Za-z])"), ">="),
    (re.compile(r"\\(?:neq|ne)(?![A-Za-z])"), "!="),
    (re.compile(r"\\lt(?![A-Za-z])"), "<"),
    (re.compile(r"\\gt(?![A-Za-z])"), ">"),
]
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_TEXT_COMMAND = re.compile(r"\\(?:text|textrm|textup|mbox|mathrm|textnormal)\s*\{([^{}]*)\}")
_LEAD = re.compile(r"^(?:the\s+)?(?:final\s+)?(?:answer|result)\s*(?:is|:)?\s*", re.IGNORECASE)
_QUALIFIER = re.compile(
    r"(?:,\s*|\s+|\()(?=(?:for|where|when|if|with|provided|whenever|otherwise)\b)",
    re.IGNORECASE,
)


def braced(text: str, open_at: int) -> tuple[str, int]:
    """The content of the brace group opening at ``open_at`` and the index after it."""
    depth = 0
    index = open_at
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : index], index + 1
        index += 1
    raise LatexError("unbalanced braces")


def unbox(text: str) -> str:
    """The contents of every \\boxed{...} joined by commas, or the text if there is none."""
    found: list[str] = []
    for match in _BOXED.finditer(text):
        try:
            content, _end = braced(text, match.end() - 1)
        except LatexError:
            continue
        found.append(content)
    return ", ".join(found) if found else text


def normalise(raw: str) -> str:
    text = unicodedata.normalize("NFKC", raw)
    for char, replacement in _UNICODE.items():
        text = text.replace(char, replacement)
    text = unbox(text)
    text = re.sub(r"\\[()\[\]]|\$", " ", text)
    # Degrees: 180^\circ, 180^{\circ}, 180°.
    text = re.sub(r"\^\s*\{?\s*\\circ\s*\}?|°", " ", text)
    text = _TEXT_COMMAND.sub(lambda m: f" {m.group(1)} ", text)
    text = re.sub(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big)(?![A-Za-z])\.?", "", text)
    text = re.sub(r"\\(?:displaystyle|textstyle|quad|qquad)(?![A-Za-z])|\\[,;:! ]", " ", text)
    text = re.sub(r"\\[dt]frac(?![A-Za-z])", r"\\frac", text)
    text = re.sub(r"\\mathbb\s*\{?\s*([A-Za-z])\s*\}?", r"\\mathbb{\1}", text)
    text = re.sub(r"([\^_])\{\s*([A-Za-z0-9])\s*\}", r"\1\2", text)
    text = re.sub(r"\\(?:dots|cdots|ldots|dotsc|dotsb)(?![A-Za-z])|\.\.\.", r" \\ldots ", text)
    for pattern, replacement in _RELATIONS:
        text = pattern.sub(f" {replacement} ", text)
    text = re.sub(r"(?<![<>!=])=(?!=)", " = ", text)
    text = re.sub(r"\s+", " ", text).strip()
    text = _LEAD.sub("", text)
    return text.rstrip(" .;").strip()


def split_top(text: str, separators: str = ",;") -> list[str]:
    """Split at separators outside (), [], {} (also across mixed interval brackets)."""
    parts: list[str] = []
    depth = 0
    start = 0
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and text[index + 1 : index + 2] in "{}":
            depth += 1 if text[index + 1] == "{" else -1
            index += 2
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char in separators and depth <= 0:
            parts.append(text[start:index])
            start = index + 1
        index += 1
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


def split_condition(text: str) -> tuple[str, str]:
    """Main answer and its condition (``... for some a > 0``)."""
    depth = 0
    for match in _QUALIFIER.finditer(text):
        prefix = text[: match.start()]
        depth = prefix.count("(") + prefix.count("{") - prefix.count(")") - prefix.count("}")
        if depth == 0 and match.start() > 0:
            return text[: match.start()].strip(" ,"), text[match.end() :].strip(" ()")
    return text, ""


_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{3,}")
_MATH_WORDS = {"sin", "cos", "tan", "cot", "sec", "csc", "log", "exp", "gcd", "lcm", "max", "min"}
_MATH_WORDS |= {"sinh", "cosh", "tanh", "arcsin", "arccos", "arctan", "floor", "sqrt", "mod"}
_MATH_WORDS |= {"pmod", "bmod", "frac", "binom", "infty", "cup", "cap", "equiv"}


def has_words(text: str) -> bool:
    """Whether the text holds prose (words of 3+ letters that are not math commands)."""
    return any(word.lower() not in _MATH_WORDS for word in _WORD.findall(text))


FILLER_WORDS = {
    "all", "every", "each", "any", "the", "a", "an", "are", "is", "be", "of", "and", "that",
    "such", "values", "value", "possible", "those", "which", "for", "it", "its", "n", "m", "k",
    "x", "there", "only", "in", "set", "real", "positive", "natural",
}  # fmt: skip
_SYNONYMS = {
    "numbers": "integers",
    "number": "integers",
    "integer": "integers",
    "primes": "prime",
    "two": "2",
    "three": "3",
    "powers": "power",
}


def text_key(text: str) -> str:
    """Prose reduced to its content tokens in order (``n is prime`` -> ``prime``)."""
    tokens = re.findall(r"[a-z0-9]+|[<>=!]+|[^\sa-z0-9]", text.lower())
    kept = [_SYNONYMS.get(t, t) for t in tokens if _SYNONYMS.get(t, t) not in FILLER_WORDS]
    # "odd prime numbers" and "odd primes" say the same; a bare "integers" is kept.
    if any(token != "integers" for token in kept):
        kept = [token for token in kept if token != "integers"]
    return " ".join(kept)


_FINAL_SECTION = re.compile(
    r"^[ \t]*(?:#{1,3}[ \t]*|\*\*)(?:final[ \t]+)?answer\b[^\n]*\n"
    r"(?P<body>.*?)(?=^[ \t]*#{1,3}[ \t]|\Z)",
    re.IGNORECASE | re.MULTILINE | re.DOTALL,
)
_FINAL_LINE = re.compile(
    r"^[ \t*_]*(?:final[ \t]+answer|answer)[ \t*_]*[:：][ \t*_]*(?P<value>[^\n]+)$",
    re.IGNORECASE | re.MULTILINE,
)
_NOT_APPLICABLE = re.compile(r"^\W*(?:not applicable|n/?a|none required|no answer)\W*$", re.I)


def _last_boxed(text: str) -> str | None:
    boxes = list(_BOXED.finditer(text))
    if not boxes:
        return None
    start = boxes[-1].start()
    content = unbox(text[start:])
    return None if content == text[start:] else content


def extract_final_answer(proof_text: str) -> str | None:
    """The final answer a proof states: its "Final answer" section (the box in it, if any),
    else the last ``\\boxed{...}``, else a last "Final answer:" / "Answer:" line."""
    try:
        sections = list(_FINAL_SECTION.finditer(proof_text))
        if sections:
            body = sections[-1].group("body").strip()
            boxed = _last_boxed(body)
            value = boxed if boxed is not None else body
            if value.strip() and not _NOT_APPLICABLE.match(value.strip()):
                return value.strip()
        boxed = _last_boxed(proof_text)
        if boxed is not None and boxed.strip():
            return boxed.strip()
        lines = list(_FINAL_LINE.finditer(proof_text))
        if lines:
            value = lines[-1].group("value").strip().strip("*_ ")
            if value and not _NOT_APPLICABLE.match(value):
                return value
    except (RecursionError, ValueError):
        return None
    return None


def answer_key(answer: str) -> str:
    """A final answer reduced to a key for comparing answers without sympy: deterministic and
    quick, for the loop's pure policy. Equal keys are the same answer; different keys may
    still be one answer written two ways (the loop then checks more, never less)."""
    try:
        return text_key(normalise(answer))
    except (RecursionError, ValueError):
        return " ".join(answer.split()).casefold()
