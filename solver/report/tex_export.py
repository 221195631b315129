"""A run's final proof as a LaTeX document (`solver report RUN --latex FILE`), and as a PDF
where a TeX engine is installed (`--pdf FILE`).

The proof is the model's Markdown with TeX math in it, and it is untrusted: TeX can read and
write files (``\\input``, ``\\openout``, ``\\write18``, ``\\catcode`` tricks, ``^^5c`` for a
backslash), so the text is rebuilt, not pasted. Every control sequence is checked against
:data:`ALLOWED_COMMANDS` (typesetting only: symbols, fonts, fractions, spacing), every
environment against :data:`ALLOWED_ENVIRONMENTS`; anything else is printed as its name
(``\\mbox{\\textbackslash{}input}``), never executed. TeX's special characters are escaped
(``#``, ``%`` and, outside math, ``& _ ^ ~``), ``^^`` is broken up, and each math or text
piece has its braces balanced, so no piece can leave its group. Markdown headings, lists,
emphasis, quotes and code blocks become their LaTeX equivalents.

The PDF is compiled in a fresh temporary directory with ``-no-shell-escape``, the paranoid
kpathsea settings (``openin_any=p``, ``openout_any=p``), no input from the terminal and a
timeout; only the PDF leaves that directory.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from solver.errors import InputError
from solver.report.latex import SYMBOLS
from solver.report.model import RunReport

__all__ = [
    "ALLOWED_COMMANDS",
    "ALLOWED_ENVIRONMENTS",
    "ENGINES",
    "compile_pdf",
    "find_engine",
    "markdown_to_latex",
    "render_latex",
    "safe_math",
    "safe_text",
]

# fmt: off
ALLOWED_COMMANDS = frozenset(
    {name for name in SYMBOLS if name.isalpha()}
    | {
        "gcd", "lcm", "max", "min", "log", "ln", "lg", "exp", "sin", "cos", "tan", "cot", "sec",
        "csc", "arcsin", "arccos", "arctan", "det", "dim", "ker", "lim", "sup", "inf", "arg",
        "Pr", "liminf", "limsup", "text", "textrm", "textnormal", "mbox", "mathrm",
        "frac", "dfrac", "tfrac", "cfrac", "sqrt", "binom", "dbinom", "tbinom",
        "mathbb", "mathcal", "mathfrak", "mathbf", "mathit", "mathsf", "mathtt", "boldsymbol",
        "textbf", "textit", "emph", "texttt", "textsc", "textsf", "underline", "textup",
        "overline", "overbrace", "underbrace", "overset", "underset", "stackrel", "boxed",
        "not", "pmod", "bmod", "pod", "mod", "operatorname", "limits", "nolimits",
        "left", "right", "middle", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr",
        "biggl", "biggr", "displaystyle", "textstyle", "scriptstyle", "substack", "phantom",
        "lbrace", "rbrace", "lbrack", "rbrack", "quad", "qquad", "hfill", "hspace", "vspace",
        "ldots", "cdots", "dots", "dotsc", "dotsb", "vdots", "ddots", "item", "noindent", "par",
        "smallskip", "medskip", "bigskip", "newline", "qedhere", "qed", "square", "blacksquare",
        "nonumber", "notag", "tag", "hline", "cdot", "times", "circ", "angle", "triangle",
        "widehat", "widetilde", "dot", "ddot", "vec", "hat", "bar", "tilde", "lfloor", "rfloor",
        "lceil", "rceil", "langle", "rangle", "mid", "nmid", "parallel", "perp", "deg",
        "textbackslash", "ell", "imath", "jmath", "wp", "Re", "Im", "top", "bot",
        "sim", "simeq", "approx", "cong", "equiv", "neq", "leqslant", "geqslant", "prec",
        "succ", "preceq", "succeq", "subsetneq", "supsetneq", "nsubseteq", "complement",
        "uparrow", "downarrow", "Uparrow", "Downarrow", "hookrightarrow", "twoheadrightarrow",
        "longmapsto", "leadsto", "xrightarrow", "xleftarrow", "varnothing", "checkmark",
    }
)
# fmt: on
ALLOWED_ENVIRONMENTS = frozenset(
    {
        "aligned",
        "align",
        "align*",
        "equation",
        "equation*",
        "gather",
        "gather*",
        "gathered",
        "multline",
        "multline*",
        "split",
        "cases",
        "matrix",
        "pmatrix",
        "bmatrix",
        "vmatrix",
        "Vmatrix",
        "smallmatrix",
        "array",
        "alignat",
        "alignat*",
        "enumerate",
        "itemize",
        "description",
        "proof",
        "quote",
        "center",
    }
)  # fmt: skip
# Display math environments a proof writes at the start of a line, outside $ ... $.
_DISPLAY_ENVS = ("align", "align*", "equation", "equation*", "gather", "gather*",
                 "multline", "multline*", "alignat", "alignat*")  # fmt: skip
_CONTROL_SYMBOLS = frozenset("\\,;!: {}%$#&_|[]()>")
_TEXT_ESCAPES = {
    "#": "\\#",
    "%": "\\%",
    "&": "\\&",
    "_": "\\_",
    "^": "\\textasciicircum{}",
    "~": "\\textasciitilde{}",
    "$": "\\$",
    "<": "\\textless{}",
    ">": "\\textgreater{}",
    "|": "\\textbar{}",
}
_MATH_ESCAPES = {"#": "\\#", "%": "\\%", "$": "\\$"}
_ENV_ARG = re.compile(r"\{([A-Za-z]+\*?)\}")
_NAME = re.compile(r"[A-Za-z]+")


def _refused(name: str) -> str:
    """What an unknown command becomes: its name as text, in either mode."""
    return "\\mbox{\\textbackslash{}" + name + "}"


def _sanitise(text: str, *, math: bool) -> str:
    """``text`` with every control sequence checked, specials escaped, braces balanced."""
    escapes = _MATH_ESCAPES if math else _TEXT_ESCAPES
    out: list[str] = []
    depth = 0
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\":
            name = _NAME.match(text, index + 1)
            if name is not None:
                word = name.group(0)
                index = name.end()
                if word in ("begin", "end"):
                    env = _ENV_ARG.match(text, index)
                    if env is not None and env.group(1) in ALLOWED_ENVIRONMENTS:
                        out.append(f"\\{word}{{{env.group(1)}}}")
                        index = env.end()
                    else:
                        out.append(_refused(word))
                elif word in ALLOWED_COMMANDS:
                    out.append("\\" + word)
                else:
                    out.append(_refused(word))
                continue
            following = text[index + 1 : index + 2]
            if following and following in _CONTROL_SYMBOLS:
                out.append("\\" + following)
                index += 2
            else:
                out.append("\\mbox{\\textbackslash{}}")
                index += 1
            continue
        if char == "^" and text.startswith("^^", index):
            # ^^5c is a backslash to TeX's reader: never let two carets meet
            out.append("^{}" if math else "\\textasciicircum{}")
            index += 1
            continue
        if char == "{":
            depth += 1
            out.append(char)
        elif char == "}":
            if depth == 0:
                out.append("\\}")
            else:
                depth -= 1
                out.append(char)
        elif char in escapes:
            out.append(escapes[char])
        elif char == "\x00" or (ord(char) < 32 and char not in "\n\t"):
            out.append(" ")
        else:
            out.append(char)
        index += 1
    out.append("}" * depth)
    return "".join(out)


def safe_math(text: str) -> str:
    return _sanitise(text, math=True)


def safe_text(text: str) -> str:
    return _sanitise(text, math=False)


# Bounded lengths: an opener without its closer must not rescan a megabyte each time.
_INLINE_MATH = re.compile(r"(?<!\\)\$(?!\$)(.{1,5000}?)(?<!\\)\$|\\\((.{1,5000}?)\\\)", re.DOTALL)
_BOLD = re.compile(r"\*\*(.{1,2000}?)\*\*|__(.{1,2000}?)__", re.DOTALL)
_ITALIC = re.compile(r"(?<![\w*])\*(?!\s)(.{1,2000}?)(?<!\s)\*(?![\w*])", re.DOTALL)
_CODE = re.compile(r"`([^`\n]+)`")
# Placeholders for converted pieces while the rest is escaped: private-use characters that
# are removed from the input first, so the input cannot forge one.
_HOLE = "\ue000"
_HOLE_END = "\ue001"


def _inline(text: str) -> str:
    """One paragraph: math kept as (checked) math, Markdown emphasis and code converted, the
    rest checked as text."""
    text = text.replace(_HOLE, "").replace(_HOLE_END, "")
    pieces: list[str] = []

    def hold(latex: str) -> str:
        pieces.append(latex)
        return f"{_HOLE}{len(pieces) - 1}{_HOLE_END}"

    text = _INLINE_MATH.sub(lambda m: hold("$" + safe_math(m.group(1) or m.group(2)) + "$"), text)
    text = _CODE.sub(lambda m: hold("\\texttt{" + _verbatim_text(m.group(1)) + "}"), text)
    text = _BOLD.sub(
        lambda m: hold("\\textbf{" + _inline_nested(m.group(1) or m.group(2), pieces) + "}"), text
    )
    text = _ITALIC.sub(lambda m: hold("\\emph{" + _inline_nested(m.group(1), pieces) + "}"), text)
    return _fill(safe_text(text), pieces)


def _inline_nested(text: str, pieces: list[str]) -> str:
    """The inside of an emphasis: already-held math stays held; the rest is checked text."""
    return _fill(safe_text(text), pieces)


_HELD = re.compile(_HOLE + r"(\d+)" + _HOLE_END)


def _fill(text: str, pieces: list[str]) -> str:
    while _HELD.search(text):
        text = _HELD.sub(lambda m: pieces[int(m.group(1))], text)
    return text


def _verbatim_text(text: str) -> str:
    """Code shown as typed: every special character escaped, backslashes as text."""
    out = []
    for char in text:
        if char == "\\":
            out.append("\\textbackslash{}")
        elif char in "{}":
            out.append("\\" + char)
        elif char in _TEXT_ESCAPES:
            out.append(_TEXT_ESCAPES[char])
        elif ord(char) < 32:
            out.append(" ")
        else:
            out.append(char)
    return "".join(out)


_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_ITEM = re.compile(r"^[ \t]*([-*+]|\d{1,9}[.)])[ \t]+(.*)$")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")
_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_SECTIONS = ("section*", "subsection*", "subsubsection*", "paragraph", "paragraph", "paragraph")


@dataclass
class _Blocks:
    out: list[str]
    paragraph: list[str]
    items: list[str]
    ordered: bool = False

    def flush(self) -> None:
        if self.paragraph:
            self.out.append(_inline("\n".join(self.paragraph)) + "\n")
            self.paragraph.clear()
        if self.items:
            env = "enumerate" if self.ordered else "itemize"
            body = "\n".join(f"  \\item {_inline(item)}" for item in self.items)
            self.out.append(f"\\begin{{{env}}}\n{body}\n\\end{{{env}}}\n")
            self.items.clear()


def markdown_to_latex(markdown: str) -> str:
    """The body of a LaTeX document from Markdown with TeX math (see the module docstring)."""
    lines = markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocks = _Blocks([], [], [])
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        fence = _FENCE.match(line)
        display = _display_start(stripped)
        if fence is not None:
            blocks.flush()
            end = index + 1
            while end < len(lines) and not lines[end].strip().startswith(fence.group(1)):
                end += 1
            code = "\\\\\n".join(_verbatim_text(text) or "~" for text in lines[index + 1 : end])
            blocks.out.append(f"\\begin{{quote}}\\ttfamily\n{code}\n\\end{{quote}}\n")
            index = end + 1
            continue
        if display is not None:
            blocks.flush()
            closing, opening = display
            body, index = _collect(lines, index, opening, closing)
            if opening.startswith("\\begin"):
                env = opening[len("\\begin{") : -1]
                blocks.out.append(f"\\begin{{{env}}}\n{safe_math(body)}\n\\end{{{env}}}\n")
            else:
                blocks.out.append(f"\\[\n{safe_math(body)}\n\\]\n")
            continue
        heading = _HEADING.match(line)
        item = _ITEM.match(line)
        if not stripped:
            blocks.flush()
        elif heading is not None:
            blocks.flush()
            command = _SECTIONS[len(heading.group(1)) - 1]
            blocks.out.append(f"\\{command}{{{_inline(heading.group(2))}}}\n")
        elif _RULE.match(line):
            blocks.flush()
            blocks.out.append("\\medskip\\hrule\\medskip\n")
        elif item is not None:
            if blocks.paragraph:
                blocks.flush()
            ordered = item.group(1)[0].isdigit()
            if blocks.items and ordered != blocks.ordered:
                blocks.flush()
            blocks.ordered = ordered
            blocks.items.append(item.group(2))
        elif blocks.items and line[:1] in (" ", "\t"):
            blocks.items[-1] += "\n" + stripped  # a list item's continuation line
        elif stripped.startswith(">"):
            blocks.flush()
            blocks.out.append(
                f"\\begin{{quote}}\n{_inline(stripped.lstrip('> '))}\n\\end{{quote}}\n"
            )
        else:
            if blocks.items:
                blocks.flush()
            blocks.paragraph.append(line)
        index += 1
    blocks.flush()
    return "\n".join(blocks.out)


def _display_start(stripped: str) -> tuple[str, str] | None:
    """(closing, opening) when a display math block starts on this line."""
    if stripped.startswith("$$"):
        return "$$", "$$"
    if stripped.startswith("\\["):
        return "\\]", "\\["
    for env in _DISPLAY_ENVS:
        opening = f"\\begin{{{env}}}"
        if stripped.startswith(opening):
            return f"\\end{{{env}}}", opening
    return None


def _collect(lines: list[str], index: int, opening: str, closing: str) -> tuple[str, int]:
    """The math between ``opening`` (on line ``index``) and ``closing``, and the next line;
    text after the closing goes back into ``lines`` as a line of its own. Without a closing,
    the block runs to the end."""
    first = lines[index].strip()[len(opening) :]
    parts: list[str] = []
    end = index
    line = first
    while True:
        if closing in line:
            inside, _, rest = line.partition(closing)
            parts.append(inside)
            if rest.strip():
                lines.insert(end + 1, rest)
            return "\n".join(parts), end + 1
        parts.append(line)
        end += 1
        if end >= len(lines):
            return "\n".join(parts), end
        line = lines[end]


PREAMBLE = r"""\documentclass[11pt]{article}
\usepackage{amsmath}
\IfFileExists{amssymb.sty}{\usepackage{amssymb}}{}
\IfFileExists{amsthm.sty}{\usepackage{amsthm}}{%
  \newenvironment{proof}{\par\noindent\textit{Proof.}\ }{\hfill$\square$\par}}
\providecommand{\mathbb}[1]{\mathbf{#1}}
\providecommand{\mathfrak}[1]{\mathrm{#1}}
\providecommand{\square}{\Box}
\providecommand{\blacksquare}{\Box}
\providecommand{\checkmark}{\surd}
\providecommand{\varnothing}{\emptyset}
\providecommand{\leqslant}{\leq}
\providecommand{\geqslant}{\geq}
\setlength{\parindent}{0pt}
\setlength{\parskip}{0.6em}
"""


def render_latex(report: RunReport) -> str:
    """A complete LaTeX document: the problem, the run's verdict on the proof, the proof."""
    problem = report.problem
    title = safe_text(" ".join(str(problem.get("title") or problem.get("id") or "").split()))
    selected = report.selected
    if report.proof_text is None or selected is None:
        verdict = "\\textbf{No proof.} This run produced no proof."
    elif selected.get("accepted"):
        verdict = "\\textbf{Accepted.} This proof passed the run's verification."
    else:
        verdict = (
            "\\textbf{NOT ACCEPTED. This proof did not pass the run's verification.} It is "
            "the run's best attempt and may be wrong."
        )
    grade = "ungraded" if report.in_loop_score is None else f"{report.in_loop_score}/7"
    facts = [
        f"outcome: {safe_text(str(report.outcome or report.state))}",
        f"why the run ended: {safe_text(' '.join(report.reason.split()))}",
        f"grade by the run's grader: {grade}",
        f"run: \\texttt{{{_verbatim_text(report.run_id)}}}",
    ]
    statement = markdown_to_latex(str(problem.get("statement") or ""))
    proof = markdown_to_latex(report.proof_text) if report.proof_text else ""
    items = "\n".join(f"  \\item {fact}" for fact in facts)
    return (
        PREAMBLE
        + f"\\title{{Proof: {title}}}\n\\date{{{safe_text(report.created[:10])}}}\n"
        + "\\begin{document}\n\\maketitle\n\n"
        + f"{verdict}\n\n\\begin{{itemize}}\n{items}\n\\end{{itemize}}\n\n"
        + f"\\section*{{Problem}}\n{statement}\n"
        + ("\\section*{Proof}\n" + proof + "\n" if proof else "")
        + "\\end{document}\n"
    )


ENGINES = ("pdflatex", "xelatex", "lualatex", "tectonic")
COMPILE_TIMEOUT_S = 120


def find_engine() -> str | None:
    for engine in ENGINES:
        found = shutil.which(engine)
        if found is not None:
            return found
    return None


def compile_pdf(document: str, *, timeout_s: float = COMPILE_TIMEOUT_S) -> bytes:
    """The PDF of ``document``, compiled in a temporary directory (see the module docstring).
    InputError (exit 2) when no engine is installed or it makes no PDF."""
    engine = find_engine()
    if engine is None:
        raise InputError(
            "--pdf: no TeX engine found (pdflatex, xelatex, lualatex or tectonic); install "
            "one, e.g. `apt-get install texlive-latex-base`, or write --latex FILE.tex instead"
        )
    name = Path(engine).name
    with tempfile.TemporaryDirectory(prefix="solver-tex-") as tmp:
        source = Path(tmp) / "proof.tex"
        source.write_text(document, encoding="utf-8")
        if name == "tectonic":
            argv = [engine, "--untrusted", "--outdir", tmp, str(source)]
        else:
            argv = [
                engine,
                "-no-shell-escape",
                "-interaction=nonstopmode",
                "-file-line-error",
                f"-output-directory={tmp}",
                str(source),
            ]
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": tmp,
            "openin_any": "p",
            "openout_any": "p",
            "shell_escape": "f",
            "TEXMFOUTPUT": tmp,
        }
        try:
            completed = subprocess.run(  # argv of our own, no shell
                argv,
                cwd=tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise InputError(f"--pdf: {name} ran over {timeout_s:.0f} s; use --latex") from None
        pdf = Path(tmp) / "proof.pdf"
        if not pdf.is_file():
            tail = completed.stdout.decode("utf-8", "replace").strip().splitlines()[-3:]
            raise InputError(f"--pdf: {name} made no PDF ({' / '.join(tail)[:300]})")
        return pdf.read_bytes()
