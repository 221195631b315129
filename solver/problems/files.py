"""Problem files: one olympiad problem read from Markdown, plain text or LaTeX.

Accepted files (at most 1 MiB, UTF-8, an optional UTF-8 byte-order mark is dropped):

- ``.md``: optional YAML front matter between a first line ``---`` and a closing ``---`` (or
  ``...``) line, with the keys ``id``, ``title``, ``source``, ``answer`` (a short final answer),
  ``reference_solution``, ``grading_guidelines`` and ``points`` (a positive integer, default 7);
  the body after it is the statement, less two things public repositories put around it
  (:mod:`solver.problems.layout`): a leading ATX heading (``# IMO 2026 — Problem 1``) is the
  title, unless the front matter names one (then it is kept as ``metadata["heading"]``), and a
  trailing metadata line after a horizontal rule (``---`` then ``*Domain: algebra · Task:
  proof_only*``) goes into ``metadata`` (keys lower-cased, spaces as ``_``).
- ``.txt``: the whole file is the statement.
- ``.tex``: the document body (``\\begin{document} ... \\end{document}``, else the whole
  file); in it, the one ``problem``, ``prob``, ``exercise`` or ``question`` environment is the
  statement (its optional ``[...]`` argument the title), with any ``solution`` or ``proof``
  environment inside it left out. Several such environments, or none beside ``\\maketitle``,
  sectioning or a solution, is refused: which part is the problem cannot be told.

A file that holds a solution write-up besides the statement (a ``## Solution`` heading, a
``Proof.`` paragraph, a ``proof`` environment) loads with a warning (:func:`read_problem`).

Without an ``id`` the file's stem is the id.

A problem's identity is :attr:`Problem.digest`, ``"sha256:" + hex`` of the UTF-8 bytes of its
normalised statement. :func:`normalise_statement` defines normalisation, applied in this order:

1. Unicode NFC;
2. every CRLF and every lone CR becomes LF;
3. trailing whitespace (spaces, tabs, other Unicode whitespace) is stripped from every line;
4. leading and trailing blank lines are dropped (no final newline remains).

Inner blank lines, indentation and everything else are kept, so two statements share a digest
exactly when they differ only in encoding form, line endings or invisible trailing space. The
statement a :class:`Problem` holds is already normalised; the exact bytes read are kept in
``original_bytes`` (never serialised) and named by ``original_digest`` (serialised).

Every bad input raises :class:`solver.errors.InputError` with one line ``"PATH: what is wrong"``.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from solver._util.terminal import one_line
from solver.errors import InputError
from solver.problems.layout import (
    MarkdownParts,
    TexStructureError,
    markdown_solution_sign,
    plain_solution_sign,
    split_markdown,
    split_tex,
)

__all__ = [
    "FRONT_MATTER_KEYS",
    "MAX_PROBLEM_BYTES",
    "PROBLEM_EXTENSIONS",
    "LoadedProblem",
    "Problem",
    "input_error",
    "load_problem",
    "normalise_statement",
    "read_checked_bytes",
    "read_checked_text",
    "read_problem",
    "sha256_digest",
    "statement_digest",
]

MAX_PROBLEM_BYTES = 1024 * 1024
MAX_ERROR_CHARS = 500
PROBLEM_EXTENSIONS = (".md", ".txt", ".tex")
FRONT_MATTER_KEYS = (
    "id",
    "title",
    "source",
    "answer",
    "reference_solution",
    "grading_guidelines",
    "points",
)
DEFAULT_POINTS = 7
_MAX_ID_CHARS = 200
# Bytes that never occur in a text file; a NUL is the classic binary tell.
_BINARY_BYTES = re.compile(rb"[\x00-\x08\x0e-\x1a\x1c-\x1f]")


def normalise_statement(text: str) -> str:
    """The canonical form of a statement (see the module docstring for the four rules)."""
    text = unicodedata.normalize("NFC", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def statement_digest(statement: str) -> str:
    """The identity of a problem: the SHA-256 of its normalised statement."""
    return sha256_digest(normalise_statement(statement).encode("utf-8"))


def input_error(path: Path | str, what: str) -> InputError:
    """An :class:`InputError` of exactly one line, ``"PATH: what is wrong"``, at most
    MAX_ERROR_CHARS long: a message quotes input, and input may be megabytes or hostile."""
    return InputError(one_line(f"{path}: {what}", MAX_ERROR_CHARS))


def short_repr(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, without building a huge repr first (a
    value made of YAML aliases is small in memory and exponential as text)."""
    if isinstance(value, str | int | float | bool) or value is None:
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
            return "a very long integer"
        text = repr(value)
    else:
        text = f"a {type(value).__name__}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Front matter holds a few short keys: no YAML document of ours needs anchors, deep
# nesting or thousands of nodes, and each of those is a way to exhaust memory or the stack.
MAX_FRONT_MATTER_DEPTH = 16
MAX_FRONT_MATTER_NODES = 10_000


class _FrontMatterLoader(yaml.SafeLoader):
    """SafeLoader with limits: no aliases, bounded depth and node count."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def _refuse(self, problem: str) -> yaml.composer.ComposerError:
        mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
        return yaml.composer.ComposerError(None, None, problem, mark)

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise self._refuse("YAML aliases are not allowed here")
        self._nodes += 1
        if self._nodes > MAX_FRONT_MATTER_NODES:
            raise self._refuse(f"more than {MAX_FRONT_MATTER_NODES} values")
        self._depth += 1
        try:
            if self._depth > MAX_FRONT_MATTER_DEPTH:
                raise self._refuse(f"nested deeper than {MAX_FRONT_MATTER_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class Problem(BaseModel):
    """One problem. Frozen; ``digest`` always matches ``statement`` (checked on validation,
    so a serialised problem whose statement was edited is refused when read back)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    statement: str
    # Filled from the statement when not given; a given digest must match it.
    digest: str = ""
    title: str | None = None
    source: str | None = None
    answer: str | None = None
    reference_solution: str | None = None
    grading_guidelines: str | None = None
    points: int = Field(default=DEFAULT_POINTS, gt=0)
    # Where the problem came from, as given: a file path, or "SET#row-N" for a set row.
    origin: str | None = None
    # Further columns of a problem set row (category, level, year ...), as text.
    metadata: dict[str, str] = Field(default_factory=dict)
    # The exact bytes read: the whole file, or for a set row the statement cell's text.
    original_bytes: bytes = Field(default=b"", exclude=True, repr=False)
    original_digest: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _fill_digests(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        statement = data.get("statement")
        if isinstance(statement, str) and not data.get("digest"):
            data["digest"] = statement_digest(statement)
        original = data.get("original_bytes")
        if isinstance(original, bytes) and original and data.get("original_digest") is None:
            data["original_digest"] = sha256_digest(original)
        return data

    @field_validator("statement")
    @classmethod
    def _normalise(cls, statement: str) -> str:
        normalised = normalise_statement(statement)
        if not normalised:
            raise ValueError("empty statement")
        return normalised

    @field_validator("id")
    @classmethod
    def _check_id(cls, problem_id: str) -> str:
        if not problem_id.strip():
            raise ValueError("empty id")
        if "\n" in problem_id or "\r" in problem_id or len(problem_id) > _MAX_ID_CHARS:
            raise ValueError(f"an id is one line of at most {_MAX_ID_CHARS} characters")
        return problem_id

    @model_validator(mode="after")
    def _check_digests(self) -> Problem:
        expected = sha256_digest(self.statement.encode("utf-8"))
        if self.digest != expected:
            raise ValueError(f"digest {self.digest} does not match the statement ({expected})")
        if self.original_bytes and self.original_digest != sha256_digest(self.original_bytes):
            raise ValueError("original_digest does not match original_bytes")
        return self


def read_checked_bytes(path: Path, *, extensions: tuple[str, ...], max_bytes: int) -> bytes:
    """The bytes of a regular file with one of ``extensions``, at most ``max_bytes`` long."""
    if not path.exists():
        raise input_error(path, "no such file")
    if path.is_dir():
        raise input_error(path, "is a directory, not a file")
    if not path.is_file():  # a FIFO or device would block or never end
        raise input_error(path, "not a regular file")
    suffix = path.suffix.lower()
    if suffix not in extensions:
        shown = repr(path.suffix) if path.suffix else "none"
        raise input_error(path, f"unknown extension {shown} (expected {_or_list(extensions)})")
    try:
        # O_NONBLOCK and fstat on the descriptor: a file swapped for a FIFO after the check
        # above must not block the open, nor be read.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise input_error(path, "not a regular file")
            if info.st_size > max_bytes:
                raise input_error(
                    path, f"file is {info.st_size} bytes, over the {_size(max_bytes)} limit"
                )
            os.set_blocking(fd, True)
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise input_error(path, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:  # grew after stat, or a special file
        raise input_error(path, f"file is over the {_size(max_bytes)} limit")
    return data


def read_checked_text(
    path: Path, *, extensions: tuple[str, ...], max_bytes: int
) -> tuple[bytes, str]:
    """The bytes and the decoded text of a UTF-8 text file (see :func:`read_checked_bytes`)."""
    data = read_checked_bytes(path, extensions=extensions, max_bytes=max_bytes)
    binary = _BINARY_BYTES.search(data)
    if binary is not None:
        raise input_error(
            path,
            f"binary file (control byte 0x{data[binary.start()]:02x} at offset {binary.start()})",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start]
        raise input_error(
            path, f"not valid UTF-8 (byte 0x{bad:02x} at offset {exc.start})"
        ) from None
    return data, text.removeprefix("\ufeff")


@dataclass(frozen=True)
class LoadedProblem:
    """A problem file as read: the problem, and warnings about it for the user (each one
    line, ``"PATH: what"``), such as a file that also holds a solution write-up."""

    problem: Problem
    warnings: tuple[str, ...] = ()


def load_problem(path: Path) -> Problem:
    """Read one problem file (``.md``, ``.txt`` or ``.tex``); see the module docstring."""
    return read_problem(path).problem


def read_problem(path: Path) -> LoadedProblem:
    """:func:`load_problem` with the file's warnings."""
    data, text = read_checked_text(path, extensions=PROBLEM_EXTENSIONS, max_bytes=MAX_PROBLEM_BYTES)
    suffix = path.suffix.lower()
    fields: dict[str, Any] = {}
    metadata: dict[str, str] = {}
    solution: str | None
    if suffix == ".md":
        fields, body = _split_front_matter(path, text)
        parts = split_markdown(body)
        if not normalise_statement(parts.statement) and parts.heading is not None:
            parts = MarkdownParts(parts.heading, None, parts.metadata)  # a heading alone
        body = parts.statement
        if parts.heading is not None:
            if fields.get("title") is None:
                fields["title"] = parts.heading
            else:
                metadata["heading"] = parts.heading
        metadata.update(parts.metadata)
        solution = markdown_solution_sign(body)
    elif suffix == ".tex":
        try:
            parts_tex = split_tex(text)
        except TexStructureError as exc:
            raise input_error(path, str(exc)) from None
        body = parts_tex.statement
        if parts_tex.title is not None:
            fields["title"] = parts_tex.title
        solution = parts_tex.solution
    else:
        body = text
        solution = plain_solution_sign(body)
    if not normalise_statement(body):
        raise input_error(path, "empty statement")
    fields.setdefault("id", path.stem)
    try:
        problem = Problem(
            statement=body, origin=str(path), original_bytes=data, metadata=metadata, **fields
        )
    except ValidationError as exc:
        raise input_error(path, _first_error(exc)) from None
    warnings: tuple[str, ...] = ()
    if solution is not None:
        where = "sent to the model" if suffix != ".tex" else "left out of the statement"
        warnings = (
            one_line(
                f"{path}: looks like a solution write-up ({solution}); that part is {where}"
                + ("; move it to the front matter's reference_solution" if suffix == ".md" else ""),
                MAX_ERROR_CHARS,
            ),
        )
    return LoadedProblem(problem, warnings)


def _split_front_matter(path: Path, text: str) -> tuple[dict[str, Any], str]:
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        return {}, text
    for index in range(1, len(lines)):
        if lines[index].rstrip() in ("---", "..."):
            closing = index
            break
    else:
        raise input_error(path, "invalid front matter: no closing '---' line")
    loader = _FrontMatterLoader("".join(lines[1:closing]))
    try:
        loaded = loader.get_single_data()
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" at line {where.line + 2}" if where is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise input_error(path, f"invalid front matter{line}: {problem}") from None
    except (ValueError, OverflowError, TypeError) as exc:
        # a date such as 2025-13-45, an integer of more digits than Python converts
        raise input_error(path, f"invalid front matter: {exc}") from None
    except RecursionError:
        raise input_error(path, "invalid front matter: nested too deeply") from None
    finally:
        loader.dispose()
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise input_error(path, "invalid front matter: expected 'key: value' lines")
    fields: dict[str, Any] = {}
    for key, value in loaded.items():
        if key not in FRONT_MATTER_KEYS:
            raise input_error(
                path,
                f"unknown front-matter key {short_repr(key)} "
                f"(allowed: {', '.join(FRONT_MATTER_KEYS)})",
            )
        fields[key] = _front_matter_value(path, key, value)
    return fields, "".join(lines[closing + 1 :])


def _front_matter_value(path: Path, key: str, value: object) -> object:
    if value is None:
        return None if key != "points" else DEFAULT_POINTS
    if key == "points":
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise input_error(
                path,
                "invalid front matter: 'points' must be a positive integer, "
                f"got {short_repr(value)}",
            )
        return value
    if isinstance(value, bool) or not isinstance(value, str | int):
        # YAML turns `yes`, `1.50` or `2025-07-15` into other types; quoting keeps the text.
        raise input_error(
            path, f"invalid front matter: {key!r} must be text, got {short_repr(value)} (quote it)"
        )
    return str(value)


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def _or_list(items: tuple[str, ...]) -> str:
    return ", ".join(items[:-1]) + " or " + items[-1] if len(items) > 1 else items[0]


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit % (1024 * 1024) == 0 else f"{limit} bytes"
