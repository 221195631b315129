"""LaTeX (or plain) math to sympy, for the answer check in :mod:`solver.answers.check`.

Two readers, tried in order:

1. A translator of its own from LaTeX to a Python expression over a closed vocabulary, parsed
   with ``sympy.parse_expr``. It comes first because it reads olympiad answers the way people
   write them: ``a(a-1)`` is a product, ``xy`` is ``x*y``, ``(2k-1)!!`` is a double factorial,
   ``\\log_{2}a`` is a logarithm to base 2; sympy's ``parse_latex`` reads the first as a
   function call and the third as a factorial of a factorial.
2. sympy's ``parse_latex`` (ANTLR) for what the translator does not know, with its function
   calls on plain letters turned back into products.

The translator emits only characters from a fixed set and names it chose, so the string handed
to ``parse_expr`` (which evaluates Python) can never carry code from the answer. Every result
passes a size guard before sympy evaluates it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import sympy
from sympy.core.function import AppliedUndef
from sympy.parsing.sympy_parser import (
    convert_xor,
    implicit_multiplication,
    parse_expr,
    standard_transformations,
)

from solver.answers.text import LatexError

MAX_EXPONENT = 100_000
MAX_INTEGER_DIGITS = 5_000
MAX_NODES = 2_000
MAX_FACTORIAL = 10_000

GREEK = frozenset(
    {
        "alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta",
        "vartheta", "iota", "kappa", "lambda", "mu", "nu", "xi", "omicron", "rho", "varrho",
        "sigma", "varsigma", "tau", "upsilon", "phi", "varphi", "chi", "psi", "omega", "Gamma",
        "Delta", "Theta", "Lambda", "Xi", "Pi", "Sigma", "Upsilon", "Phi", "Psi", "Omega",
    }
)  # fmt: skip

_FUNCTIONS = {
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "cot": "cot",
    "sec": "sec",
    "csc": "csc",
    "arcsin": "asin",
    "arccos": "acos",
    "arctan": "atan",
    "sinh": "sinh",
    "cosh": "cosh",
    "tanh": "tanh",
    "ln": "log",
    "log": "log",
    "exp": "exp",
    "gcd": "gcd",
    "lcm": "lcm",
    "max": "Max",
    "min": "Min",
}
_SPACES = {",", ";", "!", " ", ":", "quad", "qquad", "displaystyle", "textstyle", "limits"}
_SIZES = {"left", "right", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr"}
_OPERATORS = {"cdot": "*", "times": "*", "ast": "*", "div": "/"}
_WRAPPERS = {"mathrm", "mathbf", "mathit", "boldsymbol", "operatorname", "mathnormal"}

_SAFE_OUTPUT = re.compile(r"[A-Za-z0-9_ .+\-*/(),]*")
_TRANSFORMS = (*standard_transformations, convert_xor, implicit_multiplication)


class _Translator:
    """One pass over the LaTeX source producing a Python expression string."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.position = 0
        self.symbols: set[str] = set()

    def peek(self) -> str:
        return self.source[self.position] if self.position < len(self.source) else ""

    def skip_spaces(self) -> None:
        while self.peek().isspace():
            self.position += 1

    def command(self) -> str:
        match = re.compile(r"\\([A-Za-z]+|.)").match(self.source, self.position)
        if match is None:
            raise LatexError("a lone backslash")
        self.position = match.end()
        return match.group(1)

    def group(self, open_: str = "{", close: str = "}") -> str:
        """The raw text of a balanced group starting at the current position."""
        depth = 0
        start = self.position
        while self.position < len(self.source):
            char = self.source[self.position]
            if char == "\\":
                self.position += 2
                continue
            if char == open_:
                depth += 1
            elif char == close:
                depth -= 1
                if depth == 0:
                    self.position += 1
                    return self.source[start + 1 : self.position - 1]
            self.position += 1
        raise LatexError(f"unbalanced {open_}{close}")

    def argument(self) -> str:
        """One argument: a braced group, a command with its own arguments, or one token."""
        self.skip_spaces()
        char = self.peek()
        if char == "{":
            return "(" + translate_inner(self.group(), self.symbols) + ")"
        if char == "(":
            return "(" + translate_inner(self.group("(", ")"), self.symbols) + ")"
        start = self.position
        if char == "\\":
            saved = self.position
            name = self.command()
            self.position = saved
            if name in GREEK or name in {"pi", "infty"}:
                self.command()
                return self.name_for(name)
            # A command with arguments (\frac{..}{..}) counts as one token.
            piece = _Translator(self.source[self.position :])
            piece.symbols = self.symbols
            out = piece.token()
            self.position += piece.position
            return out
        if char.isdigit():
            # One digit, as in LaTeX (\frac12); plain-text exponents are read in `token`.
            self.position += 1
            return char
        if char.isalpha():
            return self.letter()
        raise LatexError(f"unexpected {self.source[start : start + 10]!r}")

    def name_for(self, name: str) -> str:
        if name == "pi":
            return " pi "
        if name == "infty":
            return " oo "
        safe = f"v_{name}"
        self.symbols.add(safe)
        return f" {safe} "

    def letter(self) -> str:
        base = self.source[self.position]
        self.position += 1
        name = base
        if self.peek() == "_":
            self.position += 1
            self.skip_spaces()
            if self.peek() == "{":
                raw = self.group()
            elif self.peek() == "\\":
                raw = self.command()
            else:
                raw = self.peek()
                self.position += 1
            cleaned = re.sub(r"[^A-Za-z0-9]", "", raw)
            if not cleaned:
                raise LatexError("an empty subscript")
            name = f"{base}_{cleaned}"
        if name == "e":
            return " E "
        symbol = f"v_{name}"
        self.symbols.add(symbol)
        return f" {symbol} "

    def token(self) -> str:
        char = self.peek()
        if char.isspace():
            self.skip_spaces()
            return " "
        if char.isdigit() or (
            char == "." and self.source[self.position + 1 : self.position + 2].isdigit()
        ):
            match = re.compile(r"\d*\.?\d+|\d+").match(self.source, self.position)
            assert match is not None
            self.position = match.end()
            return match.group(0)
        if char.isalpha():
            return self.letter()
        if char == "{":
            return "(" + translate_inner(self.group(), self.symbols) + ")"
        if char in "()":
            self.position += 1
            return char
        if char in "[]":
            self.position += 1
            return "(" if char == "[" else ")"
        if char in "+-*/,":
            self.position += 1
            return char
        if char == "!":
            self.position += 1
            return "!"
        if char == "^":
            self.position += 1
            self.skip_spaces()
            if self.peek().isdigit():
                match = re.compile(r"\d+").match(self.source, self.position)
                assert match is not None
                self.position = match.end()
                return f"**{match.group(0)}"
            return f"**({self.argument()})"
        if char == "\\":
            return self.latex_command()
        raise LatexError(f"unexpected character {char!r}")

    def latex_command(self) -> str:
        name = self.command()
        if name in _SPACES or name in _SIZES:
            return " "
        if name in _OPERATORS:
            return _OPERATORS[name]
        if name in {"frac", "dfrac", "tfrac", "cfrac"}:
            top = self.argument()
            bottom = self.argument()
            return f"(({top})/({bottom}))"
        if name in {"binom", "dbinom", "tbinom", "choose"}:
            top = self.argument()
            bottom = self.argument()
            return f"binomial({top},{bottom})"
        if name == "sqrt":
            self.skip_spaces()
            if self.peek() == "[":
                index = translate_inner(self.group("[", "]"), self.symbols)
                return f"(({self.argument()})**(1/({index})))"
            return f"sqrt({self.argument()})"
        if name in {"lfloor", "lceil"}:
            return "floor(" if name == "lfloor" else "ceiling("
        if name in {"rfloor", "rceil"}:
            return ")"
        if name in GREEK or name in {"pi", "infty"}:
            return self.name_for(name)
        if name in _WRAPPERS:
            return "(" + translate_inner(self.group(), self.symbols) + ")"
        if name in _FUNCTIONS:
            return self.function(_FUNCTIONS[name])
        raise LatexError(f"unknown command \\{name}")

    def function(self, sympy_name: str) -> str:
        power = base = ""
        for _ in range(2):
            self.skip_spaces()
            if self.peek() == "^":
                self.position += 1
                power = self.argument()
            elif self.peek() == "_":
                self.position += 1
                base = self.argument()
        self.skip_spaces()
        number = re.compile(r"\d+(?:\.\d+)?").match(self.source, self.position)
        if number is not None:
            self.position = number.end()
            argument = number.group(0)
        else:
            argument = self.argument()
        call = f"{sympy_name}({argument})"
        if base and sympy_name == "log":
            call = f"(log({argument})/log({base}))"
        return f"(({call})**({power}))" if power else call

    def run(self) -> str:
        out: list[str] = []
        absolute_open = False
        while self.position < len(self.source):
            if self.peek() == "|":
                self.position += 1
                out.append(")" if absolute_open else "Abs(")
                absolute_open = not absolute_open
                continue
            out.append(self.token())
        if absolute_open:
            raise LatexError("unbalanced |")
        return "".join(out)


def translate_inner(source: str, symbols: set[str]) -> str:
    translator = _Translator(source)
    translator.symbols = symbols
    return translator.run()


def translate(source: str) -> tuple[str, set[str]]:
    """LaTeX -> (Python expression string, names of the symbols it uses)."""
    translator = _Translator(source)
    text = translator.run()
    if not _SAFE_OUTPUT.fullmatch(text.replace("!", "")):
        raise LatexError("translation produced unexpected characters")
    _refuse_tuples(text)
    return text, translator.symbols


_CALL = re.compile(r"[A-Za-z_][A-Za-z_0-9]*$")


def _refuse_tuples(text: str) -> None:
    """A comma outside a function call's parentheses would make a Python tuple: "(a, b)" is a
    pair, not an expression, and is read elsewhere."""
    calls: list[bool] = []
    for index, char in enumerate(text):
        if char == "(":
            head = _CALL.search(text[:index].rstrip())
            calls.append(head is not None and not head.group(0).startswith("v_"))
        elif char == ")":
            if calls:
                calls.pop()
        elif char == "," and not (calls and calls[-1]):
            raise LatexError("a comma outside a function call")


def _namespace(symbols: set[str]) -> dict[str, Any]:
    names: dict[str, Any] = {name: sympy.Symbol(name[2:]) for name in symbols}
    names.update(
        pi=sympy.pi,
        oo=sympy.oo,
        E=sympy.E,
        sqrt=sympy.sqrt,
        floor=sympy.floor,
        ceiling=sympy.ceiling,
        binomial=sympy.binomial,
        factorial=sympy.factorial,
        factorial2=sympy.factorial2,
        Abs=sympy.Abs,
        Max=sympy.Max,
        Min=sympy.Min,
        gcd=sympy.gcd,
        lcm=sympy.lcm,
    )
    for name in set(_FUNCTIONS.values()) - set(names):
        names[name] = getattr(sympy, name)
    return names


def check_size(expr: sympy.Basic) -> None:
    """Refuse expressions whose evaluation could run away (huge powers, huge trees)."""
    for nodes, node in enumerate(sympy.preorder_traversal(expr), start=1):
        if nodes > MAX_NODES:
            raise LatexError("expression too large")
        if isinstance(node, sympy.Integer) and abs(int(node)).bit_length() > MAX_INTEGER_DIGITS * 4:
            raise LatexError("integer too large")
        if isinstance(node, sympy.Pow) and _magnitude(node.exp) > MAX_EXPONENT:
            raise LatexError("exponent too large")
        if (
            isinstance(node, sympy.factorial | sympy.factorial2 | sympy.binomial)
            and _magnitude(node.args[0]) > MAX_FACTORIAL
        ):
            raise LatexError("factorial too large")


def _magnitude(value: sympy.Basic) -> float:
    """|value| estimated with evalf (which never expands huge powers exactly); 0 if symbolic."""
    if not value.free_symbols:
        try:
            number = complex(sympy.N(value, 8))
        except (TypeError, ValueError, OverflowError):
            return float("inf")
        return abs(number)
    return 0.0


def _from_translation(source: str) -> sympy.Expr:
    text, symbols = translate(source)
    if not text.strip():
        raise LatexError("empty expression")
    namespace = _namespace(symbols)
    unevaluated = parse_expr(
        text, local_dict=dict(namespace), transformations=_TRANSFORMS, evaluate=False
    )
    check_size(unevaluated)
    value = parse_expr(text, local_dict=dict(namespace), transformations=_TRANSFORMS)
    if not isinstance(value, sympy.Expr):
        raise LatexError("not an expression")
    return value


def _from_parse_latex(source: str) -> sympy.Expr:
    from sympy.parsing.latex import parse_latex

    value = parse_latex(source)
    if not isinstance(value, sympy.Expr):
        raise LatexError("not an expression")
    # parse_latex reads "a(b+1)" as a call of an undefined function a: make it a product. A
    # call with several arguments or a longer name is a command it did not understand
    # (c \in (0,1) -> c*in(0, 1)): refuse rather than guess.
    replacements: dict[sympy.Basic, sympy.Basic] = {}
    for call in value.atoms(AppliedUndef):
        name = str(call.func)
        if len(call.args) != 1 or (len(name) > 1 and name not in GREEK):
            raise LatexError(f"unknown function {name!r}")
        replacements[call] = sympy.Symbol(name) * call.args[0]
    value = value.xreplace(replacements)
    # Its names are "r_{1}"; the translator's are "r_1". A multi-letter name that is not a
    # Greek letter is a command it did not understand (\mathbb{Z} -> Z*mathbb): refuse.
    renames: dict[sympy.Basic, sympy.Basic] = {}
    for symbol in value.free_symbols:
        name = re.sub(r"[{}\\ ]", "", str(symbol))
        head = name.split("_")[0]
        if len(head) > 1 and head not in GREEK:
            raise LatexError(f"unknown name {name!r}")
        renames[symbol] = sympy.E if name == "e" else sympy.Symbol(name)
    value = value.xreplace(renames)
    check_size(value)
    return value


READERS: tuple[Callable[[str], sympy.Expr], ...] = (_from_translation, _from_parse_latex)


def to_sympy(source: str) -> sympy.Expr:
    """One math expression (no relations, no commas) as a sympy expression."""
    if re.search(r"[=<>]|\\(?:le|ge|ne|lt|gt|in|mid|to|cup|cap|setminus)(?![A-Za-z])", source):
        # parse_latex would read a prefix of "x^2 (x >= 2), 0 (x = 1)" and drop the rest.
        raise LatexError("a relation is not an expression")
    errors: list[str] = []
    for reader in READERS:
        try:
            return reader(source)
        except LatexError as exc:
            errors.append(str(exc))
        except Exception as exc:  # sympy and ANTLR raise many unrelated types
            errors.append(f"{type(exc).__name__}: {str(exc)[:80]}")
    raise LatexError("; ".join(errors))
