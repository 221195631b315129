"""A small offline renderer of the TeX that proofs are written in, to readable HTML.

Not a TeX engine: it covers what olympiad proofs mostly use (Greek letters, relations and
arrows, ``\\frac``, ``\\sqrt``, ``\\binom``, super- and subscripts, ``\\mathbb``, ``\\text``,
``\\pmod``, accents, ``aligned``/``cases`` environments, and bare ``equation``, ``align``,
``gather`` and ``multline`` display environments) with Unicode and a few CSS classes,
so a report reads well without network or a JavaScript math library. Anything it does not
know is shown as its source. The report always keeps the raw source one click away.

Every piece of text is HTML-escaped before it is placed, so model output cannot inject markup.
"""

from __future__ import annotations

import html
import re

# fmt: off
_GREEK = [
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
    "lambda", "mu", "nu", "xi", "pi", "rho", "sigma", "tau", "upsilon", "phi", "chi", "psi",
    "omega",
]
_GREEK_UPPER = [
    "Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi", "Sigma", "Upsilon", "Phi", "Psi", "Omega",
]

SYMBOLS: dict[str, str] = {
    **dict(zip(_GREEK, "αβγδεζηθικλμνξπρστυφχψω", strict=True)),
    **dict(zip(_GREEK_UPPER, "ΓΔΘΛΞΠΣΥΦΨΩ", strict=True)),
    "varepsilon": "ε", "vartheta": "ϑ", "varphi": "φ", "varpi": "ϖ", "varrho": "ϱ",
    "le": "≤", "leq": "≤", "leqslant": "≤", "ge": "≥", "geq": "≥", "geqslant": "≥",
    "ne": "≠", "neq": "≠", "lt": "<", "gt": ">", "ll": "≪", "gg": "≫",
    "cdot": "·", "times": "×", "div": "÷", "pm": "±", "mp": "∓", "ast": "∗", "star": "⋆",
    "infty": "∞", "in": "∈", "notin": "∉", "ni": "∋", "subset": "⊂", "subseteq": "⊆",
    "subsetneq": "⊊", "supset": "⊃", "supseteq": "⊇", "cup": "∪", "cap": "∩",
    "bigcup": "⋃", "bigcap": "⋂", "setminus": "∖", "emptyset": "∅", "varnothing": "∅",
    "forall": "∀", "exists": "∃", "nexists": "∄", "neg": "¬", "lnot": "¬", "land": "∧",
    "lor": "∨", "wedge": "∧", "vee": "∨", "oplus": "⊕", "otimes": "⊗",
    "to": "→", "rightarrow": "→", "leftarrow": "←", "gets": "←", "Rightarrow": "⇒",
    "Leftarrow": "⇐", "implies": "⇒", "impliedby": "⇐", "iff": "⇔", "Leftrightarrow": "⇔",
    "leftrightarrow": "↔", "longrightarrow": "⟶", "Longrightarrow": "⟹", "mapsto": "↦",
    "uparrow": "↑", "downarrow": "↓",
    "equiv": "≡", "approx": "≈", "sim": "∼", "simeq": "≃", "cong": "≅", "propto": "∝",
    "mid": "∣", "nmid": "∤", "parallel": "∥", "perp": "⊥", "angle": "∠", "measuredangle": "∡",
    "triangle": "△", "square": "□", "circ": "∘", "bullet": "•", "degree": "°",
    "prime": "′", "ldots": "…", "dots": "…", "cdots": "⋯", "vdots": "⋮", "ddots": "⋱",
    "sum": "∑", "prod": "∏", "int": "∫", "partial": "∂", "nabla": "∇",
    "lfloor": "⌊", "rfloor": "⌋", "lceil": "⌈", "rceil": "⌉", "langle": "⟨", "rangle": "⟩",
    "lvert": "|", "rvert": "|", "vert": "|", "lVert": "‖", "rVert": "‖", "Vert": "‖",
    "quad": "\u2003", "qquad": "\u2003\u2003", ",": "\u2009", ":": "\u2005", ";": "\u2005",
    "!": "", " ": " ", "{": "{", "}": "}", "%": "%", "$": "$", "#": "#", "&": "&", "_": "_",
    "|": "‖", "backslash": "\\", "colon": ":", "aleph": "ℵ", "ell": "ℓ", "hbar": "ħ",
    "therefore": "∴", "because": "∵", "blacksquare": "■", "qed": "∎", "Box": "□",
}
_NAMED_FUNCTIONS = frozenset([
    "gcd", "lcm", "max", "min", "log", "ln", "lg", "exp", "sin", "cos", "tan", "cot", "sec",
    "csc", "arcsin", "arccos", "arctan", "det", "dim", "ker", "lim", "sup", "inf", "mod", "arg",
    "Pr",
])
_BLACKBOARD = dict(zip("NZQRCPFHK", "ℕℤℚℝℂℙ𝔽ℍ𝕂", strict=True))
_ACCENTS = {
    "hat": "\u0302", "widehat": "\u0302", "bar": "\u0304", "tilde": "\u0303",
    "widetilde": "\u0303", "vec": "\u20d7", "dot": "\u0307", "ddot": "\u0308",
}
_IGNORED = frozenset([
    "left", "right", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr",
    "displaystyle", "textstyle", "limits", "nolimits", "nonumber", "notag",
])
_TEXT_COMMANDS = frozenset(
    ["text", "textrm", "textnormal", "mbox", "mathrm", "operatorname", "textup"]
)
_BOLD_COMMANDS = frozenset(["textbf", "mathbf", "boldsymbol", "bm"])
_ITALIC_COMMANDS = frozenset(["textit", "mathit", "emph"])
# fmt: on

# Display environments written bare in the prose (outside $ and \[), as the ProofBench
# reference solutions do; their body is math with & alignment and \\ line breaks.
_DISPLAY_ENVS = r"equation\*?|align\*?|gather\*?|multline\*?"
_MATH = re.compile(
    r"\$\$(?P<dd>.+?)\$\$|\\\[(?P<db>.+?)\\\]"
    rf"|\\begin\{{(?P<env>{_DISPLAY_ENVS})\}}(?P<de>.+?)\\end\{{(?P=env)\}}"
    r"|\\\((?P<ip>.+?)\\\)|(?<![\\$])\$(?P<id>[^$]+?)(?<!\\)\$",
    re.DOTALL,
)
_TOKEN = re.compile(r"\\([A-Za-z]+)\*?|\\(.)|([{}^_&])|(\s+)|(.)", re.DOTALL)


class _Parser:
    def __init__(self, source: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        for match in _TOKEN.finditer(source):
            word, symbol, special, space, char = match.groups()
            if word is not None:
                self.tokens.append(("cmd", word))
            elif symbol is not None:
                self.tokens.append(("cmd", symbol) if symbol != "\\" else ("newline", ""))
            elif special is not None:
                self.tokens.append(("special", special))
            elif space is not None:
                self.tokens.append(("space", " "))
            else:
                self.tokens.append(("char", char))
        self.pos = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> tuple[str, str] | None:
        token = self.peek()
        if token is not None:
            self.pos += 1
        return token

    def skip_space(self) -> None:
        while (tok := self.peek()) is not None and tok[0] == "space":
            self.pos += 1

    def group_source(self) -> str:
        """The raw source of the next group, for commands that take text (``\\text``)."""
        self.skip_space()
        tok = self.peek()
        if tok != ("special", "{"):
            taken = self.take()
            return taken[1] if taken else ""
        self.pos += 1
        depth, out = 1, []
        while (tok := self.take()) is not None:
            if tok == ("special", "{"):
                depth += 1
            elif tok == ("special", "}"):
                depth -= 1
                if depth == 0:
                    break
            out.append(("\\" + tok[1]) if tok[0] == "cmd" and tok[1].isalpha() else tok[1])
        return "".join(out)

    def argument(self) -> str:
        """The next group or single token, rendered."""
        self.skip_space()
        tok = self.peek()
        if tok == ("special", "{"):
            self.pos += 1
            return self.sequence(until="}")
        return self.atom()

    def optional_argument(self) -> str | None:
        if self.peek() == ("char", "["):
            self.pos += 1
            out = []
            while (tok := self.peek()) is not None and tok != ("char", "]"):
                out.append(self.atom())
            self.pos += 1
            return "".join(out)
        return None

    def sequence(self, until: str | None = None) -> str:
        out: list[str] = []
        while (tok := self.peek()) is not None:
            if until is not None and tok == ("special", until):
                self.pos += 1
                break
            out.append(self.atom())
        return "".join(out)

    def atom(self) -> str:
        tok = self.take()
        if tok is None:
            return ""
        kind, value = tok
        if kind == "space":
            return " "
        if kind == "newline":
            self.optional_argument()  # a spacing like \\[2mm]
            return "<br>"
        if kind == "char":
            return html.escape(value)
        if kind == "special":
            if value == "{":
                return self.sequence(until="}")
            if value == "^":
                return f"<sup>{self.argument()}</sup>"
            if value == "_":
                return f"<sub>{self.argument()}</sub>"
            return "\u2003" if value == "&" else ""
        return self.command(value)

    def command(self, name: str) -> str:
        if name in SYMBOLS:
            return html.escape(SYMBOLS[name])
        if name in _NAMED_FUNCTIONS:
            return f'<span class="fn">{name}</span>'
        if name in _IGNORED:
            return ""
        if name in ("frac", "dfrac", "tfrac", "cfrac"):
            top, bottom = self.argument(), self.argument()
            return f'<span class="frac"><span>{top}</span><span>{bottom}</span></span>'
        if name == "binom":
            top, bottom = self.argument(), self.argument()
            return f'(<span class="stack"><span>{top}</span><span>{bottom}</span></span>)'
        if name == "sqrt":
            index = self.optional_argument()
            body = self.argument()
            root = f"<sup>{index}</sup>" if index else ""
            return f'{root}√<span class="radicand">{body}</span>'
        if name in ("pmod", "bmod", "mod"):
            if name == "pmod":
                return f' (<span class="fn">mod</span> {self.argument()})'
            return ' <span class="fn">mod</span> '
        if name in ("mathbb", "Bbb"):
            letters = self.group_source()
            return html.escape("".join(_BLACKBOARD.get(ch, ch) for ch in letters))
        if name in ("mathcal", "mathscr", "mathfrak"):
            return f'<span class="cal">{self.argument()}</span>'
        if name in _TEXT_COMMANDS:
            return f'<span class="text">{html.escape(self.group_source())}</span>'
        if name in _BOLD_COMMANDS:
            return f"<b>{self.argument()}</b>"
        if name in _ITALIC_COMMANDS:
            return f"<i>{self.argument()}</i>"
        if name in ("overline", "underline"):
            return f'<span class="{name}">{self.argument()}</span>'
        if name in _ACCENTS:
            return f"{self.argument()}{_ACCENTS[name]}"
        if name in ("begin", "end"):
            self.group_source()  # the environment's name
            if name == "begin" and self.peek() == ("special", "{"):
                self.group_source()  # an array's column spec
            return "<br>" if name == "end" else ""
        if name in ("label", "tag"):
            label = self.group_source()  # a reference name is not shown; a tag is
            return f" ({html.escape(label)})" if name == "tag" else ""
        if name == "not":
            return f"{self.atom()}\u0338"
        return html.escape("\\" + name)


def math_to_html(source: str, *, display: bool = False) -> str:
    """One math expression (without its delimiters) as HTML."""
    body = _Parser(source.strip()).sequence()
    kind = "math display" if display else "math"
    return f'<span class="{kind}">{body}</span>'


def _text_to_html(text: str) -> str:
    """Text outside math: escaped, with the few text-mode TeX commands statements use."""
    out = html.escape(text, quote=False)
    out = re.sub(r"\\(?:emph|textit)\{([^{}]*)\}", r"<i>\1</i>", out)
    out = re.sub(r"\\textbf\{([^{}]*)\}", r"<b>\1</b>", out)
    out = re.sub(r"\\(?:begin|end)\{(?:itemize|enumerate|center|quote)\}", "", out)
    out = re.sub(r"\\item\s*", "• ", out)
    return out.replace("\\$", "$").replace("~", "\u00a0").replace("---", "—").replace("--", "–")


def tex_to_html(text: str) -> str:
    """Prose with inline and display math, as HTML for a ``white-space: pre-wrap`` block.
    Markdown headings (``#`` lines), ``**bold**``, ``*emphasis*`` and ``---`` rules are shown
    as such."""
    parts: list[str] = []
    position = 0
    for match in _MATH.finditer(text):
        before = text[position : match.start()]
        display = any(match.group(g) is not None for g in ("dd", "db", "de"))
        if display:  # the block is on its own line already
            before = re.sub(r"\n[ \t]*$", "", before)
        parts.append(_text_to_html(before))
        source = next(g for g in match.group("dd", "db", "de", "ip", "id") if g is not None)
        parts.append(math_to_html(source, display=display))
        position = match.end()
        if display and text.startswith("\n", position):
            position += 1
    parts.append(_text_to_html(text[position:]))
    rendered = "".join(parts)
    rendered = re.sub(r"(?m)^[ \t]*(?:—|\*\*\*|___)[ \t]*$\n?", "<hr>", rendered)
    rendered = re.sub(r"\*\*([^*\n]+?)\*\*", r"<b>\1</b>", rendered)
    rendered = re.sub(r"(?<![*\w])\*([^*\s][^*\n]*?)\*(?![*\w])", r"<i>\1</i>", rendered)
    return re.sub(
        r"(?m)^(#{1,6})[ \t]+(.*)$\n*",
        lambda m: f'<span class="h h{len(m.group(1))}">{m.group(2)}</span>',
        rendered,
    )
