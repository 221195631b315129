"""Problem sets: many problems in one CSV, JSONL or JSON file (used by ``solver eval``).

The container is chosen by the extension: ``.csv`` (a header row, RFC 4180 quoting), ``.jsonl``
(one JSON object a line, blank lines skipped) or ``.json`` (a list of objects). The columns are
chosen by a *format*, a mapping from :class:`~solver.problems.files.Problem` field to column name.
Four formats match the public sets as published, and are detected from their columns:

=================  =========================================================================
format             columns (problem field <- source column)
=================  =========================================================================
proofbench         IMO-ProofBench CSV: id <- ``Problem ID``, statement <- ``Problem``,
                   reference_solution <- ``Solution``, grading_guidelines <-
                   ``Grading guidelines``, answer <- ``Short Answer``, source <- ``Source``
answerbench        IMO-AnswerBench CSV: id <- ``Problem ID``, statement <- ``Problem``,
                   answer <- ``Short Answer``, source <- ``Source``
deepseekmath-v2    DeepSeekMath-V2 inputs JSON: id <- ``problem_idx``, statement <-
                   ``question``, answer <- ``answer``, source <- ``contest``
proval             proval JSONL: id <- ``problem_id``, statement <- ``statement``,
                   source <- ``source``
generic            any container; each field from the column of the same name: ``id``,
                   ``statement``, ``title``, ``source``, ``answer``, ``reference_solution``,
                   ``grading_guidelines``, ``points``
=================  =========================================================================

A generic set may also use the key names most public math sets use: when the field's own
name is absent, the first present of its aliases is taken (statement <- ``problem``,
``question``, ``prompt``; answer <- ``final_answer``; reference_solution <- ``solution``;
grading_guidelines <- ``rubric``, ``marking_scheme``; id <- ``problem_id``, ``idx``), and
:attr:`ProblemSet.mapping_note` says in one line which were used.

A user mapping (``{"statement": "Problem"}``, on the command line ``--map statement=Problem``)
overrides single entries of the format's mapping (and the aliases). Only the statement column
is required; a generic set without an ``id`` column numbers its problems ``<file stem>-<n>``.
Columns no field uses are kept, as text, in :attr:`Problem.metadata`. Empty cells count as
absent.

A problem read from a set keeps the statement cell's exact text as ``original_bytes``; the
whole file is named by :attr:`ProblemSet.digest`. Every bad input raises
:class:`solver.errors.InputError` with one line ``"PATH: what is wrong"``.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from solver.problems.files import (
    Problem,
    input_error,
    normalise_statement,
    read_checked_text,
    sha256_digest,
)

__all__ = [
    "FORMATS",
    "MAX_SET_BYTES",
    "PROBLEM_FIELDS",
    "SET_EXTENSIONS",
    "ProblemSet",
    "load_problem_set",
    "parse_mapping",
]

MAX_SET_BYTES = 64 * 1024 * 1024
SET_EXTENSIONS = (".csv", ".jsonl", ".json")
PROBLEM_FIELDS = (
    "id",
    "statement",
    "title",
    "source",
    "answer",
    "reference_solution",
    "grading_guidelines",
    "points",
)
FORMATS: Mapping[str, Mapping[str, str]] = {
    "proofbench": {
        "id": "Problem ID",
        "statement": "Problem",
        "reference_solution": "Solution",
        "grading_guidelines": "Grading guidelines",
        "answer": "Short Answer",
        "source": "Source",
    },
    "answerbench": {
        "id": "Problem ID",
        "statement": "Problem",
        "answer": "Short Answer",
        "source": "Source",
    },
    "deepseekmath-v2": {
        "id": "problem_idx",
        "statement": "question",
        "answer": "answer",
        "source": "contest",
    },
    "proval": {"id": "problem_id", "statement": "statement", "source": "source"},
    "generic": {name: name for name in PROBLEM_FIELDS},
}
# Key names public sets use for a generic field, tried in order when the field's own name is
# absent (the "problem" JSONL is the common case: most math datasets on the hub).
ALIASES: Mapping[str, tuple[str, ...]] = {
    "id": ("problem_id", "idx", "uid"),
    "statement": ("problem", "question", "prompt"),
    "answer": ("final_answer",),
    "reference_solution": ("solution", "reference"),
    "grading_guidelines": ("rubric", "marking_scheme", "guidelines"),
}
# Detection: the first format whose signature columns are all present (order matters:
# ProofBench's columns are a superset of AnswerBench's identifying ones).
_SIGNATURES: tuple[tuple[str, frozenset[str]], ...] = (
    ("proofbench", frozenset({"Problem ID", "Problem", "Solution", "Grading guidelines"})),
    ("answerbench", frozenset({"Problem ID", "Problem", "Short Answer"})),
    ("deepseekmath-v2", frozenset({"question", "problem_idx"})),
    ("proval", frozenset({"problem_id", "statement"})),
)


@dataclass(frozen=True)
class _Row:
    label: str  # "row 3" (CSV, header excluded), "line 3" (JSONL) or "item 3" (JSON)
    cells: dict[str, object]


@dataclass(frozen=True)
class ProblemSet:
    """The problems of one set file, in file order, with unique ids."""

    path: Path
    format: str
    problems: tuple[Problem, ...]
    digest: str  # "sha256:<hex>" of the file's bytes
    # One line each: rows read but suspicious (a CSV row with fewer fields than the header).
    warnings: tuple[str, ...] = ()
    # Which aliased keys a generic set was read with ("statement <- 'problem'"), else "".
    mapping_note: str = ""

    def __len__(self) -> int:
        return len(self.problems)

    def __iter__(self) -> Iterator[Problem]:
        return iter(self.problems)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(problem.id for problem in self.problems)

    def by_id(self, problem_id: str) -> Problem:
        for problem in self.problems:
            if problem.id == problem_id:
                return problem
        raise input_error(self.path, f"no problem with id {problem_id!r}")


def parse_mapping(pairs: tuple[str, ...] | list[str], *, origin: str = "--map") -> dict[str, str]:
    """``["statement=Problem", "id=No."]`` -> ``{"statement": "Problem", "id": "No."}``."""
    mapping: dict[str, str] = {}
    for pair in pairs:
        field, sep, column = pair.partition("=")
        field, column = field.strip(), column.strip()
        if not sep or not field or not column:
            raise input_error(origin, f"expected FIELD=COLUMN, got {pair!r}")
        mapping[field] = column
    return mapping


def load_problem_set(
    path: Path, *, format: str | None = None, mapping: dict[str, str] | None = None
) -> ProblemSet:
    """Read a problem set; ``format=None`` detects it from the columns (see the module
    docstring), ``mapping`` overrides single field -> column entries of the format."""
    if format is not None and format not in FORMATS:
        raise input_error(path, f"unknown set format {format!r} (known: {', '.join(FORMATS)})")
    for field in mapping or {}:
        if field not in PROBLEM_FIELDS:
            raise input_error(
                path,
                f"unknown field {field!r} in the mapping (fields: {', '.join(PROBLEM_FIELDS)})",
            )
    data, text = read_checked_text(path, extensions=SET_EXTENSIONS, max_bytes=MAX_SET_BYTES)
    suffix = path.suffix.lower()
    warnings: list[str] = []
    if suffix == ".csv":
        columns, rows, warnings = _read_csv(path, text)
    elif suffix == ".jsonl":
        columns, rows = _read_jsonl(path, text)
    else:
        columns, rows = _read_json(path, text)
    if not rows:
        raise input_error(path, "no problems in the set")
    chosen = format or _detect(columns)
    aliased = _aliased(columns, set(mapping or {})) if chosen == "generic" else {}
    columns_of = {**FORMATS[chosen], **aliased, **(mapping or {})}
    _check_columns(path, chosen, columns_of, columns, set(mapping or {}), suffix == ".csv")
    problems = _problems(path, rows, columns_of)
    note = ", ".join(f"{field} <- {column!r}" for field, column in aliased.items())
    return ProblemSet(
        path=path,
        format=chosen,
        problems=problems,
        digest=sha256_digest(data),
        warnings=tuple(warnings),
        mapping_note=f"generic format read with {note}" if note else "",
    )


def _aliased(columns: set[str], user_fields: set[str]) -> dict[str, str]:
    """For each generic field whose own key is absent (and the user did not map), the first
    alias present in the set."""
    chosen: dict[str, str] = {}
    for field, aliases in ALIASES.items():
        if field in columns or field in user_fields:
            continue
        found = next((alias for alias in aliases if alias in columns), None)
        if found is not None:
            chosen[field] = found
    return chosen


def _detect(columns: set[str]) -> str:
    for name, signature in _SIGNATURES:
        if signature <= columns:
            return name
    return "generic"


def _check_columns(
    path: Path,
    format_name: str,
    columns_of: Mapping[str, str],
    found: set[str],
    user_fields: set[str],
    is_csv: bool,
) -> None:
    """The statement column (and every column the user named) must exist; for a named format
    the id column too, since its ids are what results are reported under."""
    required = {"statement"} | user_fields
    if format_name != "generic":
        required.add("id")
    kind = "column" if is_csv else "key"
    for field in sorted(required, key=PROBLEM_FIELDS.index):
        column = columns_of[field]
        if column not in found:
            shown = ", ".join(repr(name) for name in sorted(found)) or "none"
            known = ""
            if field in ALIASES and format_name == "generic":
                known = f" (nor {', '.join(repr(alias) for alias in ALIASES[field])})"
            raise input_error(
                path,
                f"no {field} {kind} {column!r}{known} ({format_name} format); "
                f"{kind}s found: {shown}; name it with --map {field}=<{kind}>",
            )


def _read_csv(path: Path, text: str) -> tuple[set[str], list[_Row], list[str]]:
    # Not strict: the published IMO-AnswerBench CSV has a row with a stray quote that only a
    # lenient reader (Python's default, pandas) gets through; such rows are reported instead.
    reader = csv.reader(io.StringIO(text, newline=""))
    warnings: list[str] = []
    try:
        header = next(reader, None)
        if header is None:
            raise input_error(path, "empty CSV file (no header row)")
        names = [name.strip() for name in header]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise input_error(path, f"duplicate CSV column {duplicates[0]!r}")
        rows: list[_Row] = []
        for number, record in enumerate(reader, start=1):
            if not any(cell.strip() for cell in record):
                continue  # a blank line, typically at the end
            if len(record) > len(names):
                raise input_error(
                    path, f"row {number}: {len(record)} fields, the header has {len(names)}"
                )
            if len(record) < len(names):
                warnings.append(
                    f"{path}: row {number}: {len(record)} fields, the header has {len(names)}"
                    " (a stray quote? later cells may have shifted)"
                )
            rows.append(_Row(f"row {number}", dict(zip(names, record, strict=False))))
    except csv.Error as exc:
        raise input_error(path, f"invalid CSV near line {reader.line_num}: {exc}") from None
    return set(names), rows, warnings


def _read_jsonl(path: Path, text: str) -> tuple[set[str], list[_Row]]:
    rows: list[_Row] = []
    columns: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        label = f"line {number}"
        rows.append(_Row(label, _json_object(path, label, _parse_json(path, label, line))))
        columns |= rows[-1].cells.keys()
    return columns, rows


def _read_json(path: Path, text: str) -> tuple[set[str], list[_Row]]:
    items = _parse_json(path, "", text)
    if not isinstance(items, list):
        raise input_error(path, "a JSON problem set is a list of objects")
    rows = [
        _Row(f"item {number}", _json_object(path, f"item {number}", item))
        for number, item in enumerate(items, start=1)
    ]
    columns: set[str] = set()
    for row in rows:
        columns |= row.cells.keys()
    return columns, rows


def _parse_json(path: Path, label: str, text: str) -> object:
    where = f"{label}: " if label else ""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise input_error(path, f"{where}invalid JSON at line {exc.lineno}: {exc.msg}") from None
    except RecursionError:
        raise input_error(path, f"{where}invalid JSON: nested too deeply") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise input_error(path, f"{where}invalid JSON: {exc}") from None
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        # "\ud800" escapes a lone surrogate: no text, and nothing a run could store
        raise input_error(path, f"{where}a string holds a lone surrogate escape") from None
    except RecursionError:
        raise input_error(path, f"{where}invalid JSON: nested too deeply") from None
    return value


def _json_object(path: Path, label: str, value: object) -> dict[str, object]:
    if not isinstance(value, dict):
        raise input_error(path, f"{label}: expected a JSON object, got {type(value).__name__}")
    return value


def _problems(path: Path, rows: list[_Row], columns_of: Mapping[str, str]) -> tuple[Problem, ...]:
    used = set(columns_of.values())
    first_seen: dict[str, str] = {}
    problems: list[Problem] = []
    for number, row in enumerate(rows, start=1):
        fields: dict[str, Any] = {}
        for field, column in columns_of.items():
            value = _cell_text(row.cells.get(column))
            if value is not None:
                fields[field] = value
        raw_statement = fields.get("statement")
        if raw_statement is None or not normalise_statement(raw_statement):
            raise input_error(path, f"{row.label}: empty statement")
        fields.setdefault("id", f"{path.stem}-{number}")
        fields["id"] = fields["id"].strip()
        if "points" in fields:
            fields["points"] = _points(path, row.label, fields["points"])
        problem_id = fields["id"]
        if problem_id in first_seen:
            raise input_error(
                path, f"duplicate id {problem_id!r} ({first_seen[problem_id]} and {row.label})"
            )
        first_seen[problem_id] = row.label
        metadata = {
            column: text
            for column, value in row.cells.items()
            if column not in used and (text := _cell_text(value)) is not None
        }
        try:
            problems.append(
                Problem(
                    **fields,
                    origin=f"{path}#{row.label.replace(' ', '-')}",
                    metadata=metadata,
                    original_bytes=raw_statement.encode("utf-8"),
                )
            )
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            message = str(error["msg"]).removeprefix("Value error, ")
            raise input_error(path, f"{row.label}: {where}: {message}") from None
    return tuple(problems)


def _cell_text(value: object) -> str | None:
    """A cell as text; empty cells and JSON nulls are absent."""
    if value is None:
        return None
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _points(path: Path, label: str, text: str) -> int:
    try:
        points = int(text.strip())
    except ValueError:
        points = 0
    if points <= 0:
        raise input_error(path, f"{label}: points must be a positive integer, got {text!r}")
    return points
