"""Where the statement is in a problem file as people write them.

Public repositories wrap a statement in Markdown: a heading (``# IMO 2026 — Problem 1``) above
it and a metadata line (``*Domain: number_theory · Task: proof_only*``) after a horizontal rule
below it. The same problem in the same repository's JSON has the bare statement. Both must give
the model one statement, so the heading is a title and the trailing line metadata.

A LaTeX file is a document: a preamble, ``\\maketitle``, sections, often a solution. The
statement is the ``problem`` environment; where there is none and the document has other
structure, which part is the problem cannot be told and the file is refused.

Pure functions on text; :mod:`solver.problems.files` reads the file and names it in errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    "MarkdownParts",
    "TexParts",
    "TexStructureError",
    "markdown_solution_sign",
    "plain_solution_sign",
    "split_markdown",
    "split_tex",
]

# CommonMark ATX heading: up to 3 spaces, 1-6 '#', a space, the text, an optional closing run
# (taken apart by hand: a lazy group before optional trailing runs backtracks quadratically on
# a megabyte of spaces).
_ATX_OPEN = re.compile(r"^ {0,3}#{1,6}(?=[ \t]|$)")
_ATX_CLOSE = re.compile(r"(?:^|[ \t])#+$")
_SETEXT_H1 = re.compile(r"^ {0,3}=+[ \t]*$")
# A thematic break: three or more of one of - * _, spaces allowed between.
_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_EMPHASIS = re.compile(r"^(\*\*|__|\*|_)(.+)\1$")
_ITEM_SEPARATOR = re.compile(r"[ \t]+[·•|][ \t]+|;[ \t]+")
_KEY = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_MAX_METADATA_LINES = 5

_MARK = r"(?:\*\*|__|\*|_)?"
_MD_SOLUTION_HEADING = re.compile(
    r"^ {0,3}#{1,6}[ \t]+" + _MARK + r"(?:solutions?|proof)\b", re.IGNORECASE | re.MULTILINE
)
_PROOF_PARAGRAPH = re.compile(
    r"^[ \t]*" + _MARK + r"(?:proof|solution)" + _MARK + r"[.:]" + _MARK + r"(?:[ \t]|$)",
    re.IGNORECASE | re.MULTILINE,
)
_TEX_PROOF_ENV = re.compile(r"\\begin\{(proof|solution|sol)\*?\}")

_PROBLEM_ENVS = ("problem", "prob", "exercise", "question")
_BEGIN_PROBLEM = re.compile(r"\\begin\{(" + "|".join(_PROBLEM_ENVS) + r")(\*?)\}")
_COMMENT = re.compile(r"(?<!\\)%[^\n]*")
# Structure in a document without a problem environment that makes the statement ambiguous.
_TEX_STRUCTURE = re.compile(
    r"\\(maketitle|title|author|(?:sub)*section\*?|chapter\*?|part\*?|tableofcontents)\b"
)
_TEX_PROOF_WORD = re.compile(
    r"\\(?:textbf|textit|emph|textsc)\{(?:proof|solution)[.:]?\}", re.IGNORECASE
)


@dataclass(frozen=True)
class MarkdownParts:
    statement: str
    heading: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)


def split_markdown(body: str) -> MarkdownParts:
    """The statement of a Markdown body (front matter already removed), its leading heading
    and the metadata of a trailing ``---`` + ``*Key: value · Key: value*`` block."""
    lines = body.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    heading: str | None = None
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None:
        atx = _ATX_OPEN.match(lines[first])
        if atx is not None:
            heading = _ATX_CLOSE.sub("", lines[first][atx.end() :].strip()).strip()
            del lines[first]
        elif first + 1 < len(lines) and _SETEXT_H1.match(lines[first + 1]):
            heading = lines[first].strip()
            del lines[first : first + 2]
    metadata: dict[str, str] = {}
    while lines and not lines[-1].strip():
        lines.pop()
    tail = _trailing_metadata(lines)
    if tail is not None:
        rule, metadata = tail
        lines = lines[:rule]
    return MarkdownParts("\n".join(lines), heading or None, metadata)


def _trailing_metadata(lines: list[str]) -> tuple[int, dict[str, str]] | None:
    """(index of the rule, metadata) when the last lines are a rule after a blank line (so not
    a setext underline) and then only ``Key: value`` lines."""
    start = max(0, len(lines) - _MAX_METADATA_LINES - 2)
    for rule in range(len(lines) - 2, start - 1, -1):
        if not _RULE.match(lines[rule]):
            continue
        if rule > 0 and lines[rule - 1].strip():
            return None
        found: dict[str, str] = {}
        for line in lines[rule + 1 :]:
            if not line.strip():
                continue
            items = _metadata_items(line)
            if items is None:
                return None
            found.update(items)
        return (rule, found) if found else None
    return None


def _metadata_items(line: str) -> dict[str, str] | None:
    text = line.strip()
    emphasised = _EMPHASIS.match(text)
    if emphasised is not None:
        text = emphasised.group(2).strip()
    items: dict[str, str] = {}
    for item in _ITEM_SEPARATOR.split(text):
        key, colon, value = item.partition(":")
        key = key.strip().strip("*_").strip().lower().replace(" ", "_").replace("-", "_")
        value = value.strip().strip("*").strip()
        if not colon or not value or not _KEY.match(key):
            return None
        items[key] = value
    return items


def markdown_solution_sign(statement: str) -> str | None:
    """What makes a Markdown statement look like a solution write-up, or None."""
    for pattern in (_MD_SOLUTION_HEADING, _PROOF_PARAGRAPH, _TEX_PROOF_ENV):
        found = pattern.search(statement)
        if found is not None:
            return f"it has {_quoted(found.group(0))} at line {_line_of(statement, found)}"
    return None


def plain_solution_sign(statement: str) -> str | None:
    found = _PROOF_PARAGRAPH.search(statement)
    if found is None:
        return None
    return f"it has {_quoted(found.group(0))} at line {_line_of(statement, found)}"


class TexStructureError(ValueError):
    """A LaTeX file whose problem cannot be told apart from the rest (message: what to do)."""


@dataclass(frozen=True)
class TexParts:
    statement: str
    title: str | None = None
    solution: str | None = None  # what was left out as a solution, for the warning


def split_tex(text: str) -> TexParts:
    """The statement of a LaTeX file; see the module docstring."""
    text = _COMMENT.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    # str.find, not a lazy DOTALL pattern: that rescans the rest of the file from every
    # \begin{document} when no \end{document} follows (quadratic on a hostile megabyte)
    begin = text.find("\\begin{document}")
    end = text.find("\\end{document}", begin) if begin >= 0 else -1
    if begin >= 0 and end >= 0:
        body = text[begin + len("\\begin{document}") : end]
    elif "\\documentclass" in text or "\\begin{document}" in text:
        raise TexStructureError("has \\documentclass or \\begin{document} but no whole document")
    else:
        body = text
    begins = list(_BEGIN_PROBLEM.finditer(body))
    if len(begins) > 1:
        names = sorted({f"\\begin{{{m.group(1)}{m.group(2)}}}" for m in begins})
        raise TexStructureError(
            f"holds {len(begins)} problem environments ({', '.join(names)}); "
            "put one problem in each file"
        )
    if begins:
        return _problem_environment(body, begins[0])
    structure = _TEX_STRUCTURE.search(body)
    solution = _TEX_PROOF_ENV.search(body) or _TEX_PROOF_WORD.search(body)
    solution = solution or _PROOF_PARAGRAPH.search(body)
    for found in (structure, solution):
        if found is not None:
            raise TexStructureError(
                f"the document has {_quoted(found.group(0))} and no problem environment, so "
                "which part is the problem cannot be told; put the statement in "
                "\\begin{problem} ... \\end{problem}"
            )
    return TexParts(body)


def _problem_environment(body: str, begin: re.Match[str]) -> TexParts:
    name = begin.group(1) + begin.group(2)
    end = body.find(f"\\end{{{name}}}", begin.end())
    if end < 0:
        raise TexStructureError(f"\\begin{{{name}}} is never closed by \\end{{{name}}}")
    inner = body[begin.end() : end]
    title: str | None = None
    stripped = inner.lstrip(" \t")
    if stripped.startswith("["):
        close = _closing_bracket(stripped)
        if close is not None:
            title = " ".join(stripped[1:close].split()) or None
            inner = stripped[close + 1 :]
    solution: str | None = None
    kept: list[str] = []
    position = 0
    for found in _TEX_PROOF_ENV.finditer(inner):
        if found.start() < position:
            continue
        env = found.group(0)[len("\\begin{") : -1]
        close_at = inner.find(f"\\end{{{env}}}", found.end())
        if close_at < 0:
            raise TexStructureError(f"{found.group(0)} is never closed by \\end{{{env}}}")
        kept.append(inner[position : found.start()])
        position = close_at + len(f"\\end{{{env}}}")
        solution = solution or f"a {found.group(0)} environment"
    kept.append(inner[position:])
    outside = body[: begin.start()] + body[end:]
    if solution is None:
        sign = _TEX_PROOF_ENV.search(outside) or _TEX_PROOF_WORD.search(outside)
        if sign is not None:
            solution = f"{_quoted(sign.group(0))} after the problem"
    return TexParts("".join(kept), title, solution)


def _closing_bracket(text: str) -> int | None:
    depth = 0
    for index, char in enumerate(text):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        elif char == "]" and depth == 0:
            return index
    return None


def _quoted(text: str) -> str:
    shown = " ".join(text.split())
    return repr(shown if len(shown) <= 40 else shown[:39] + "…")


def _line_of(text: str, found: re.Match[str]) -> int:
    return text.count("\n", 0, found.start()) + 1
