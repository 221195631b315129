"""The face of solver.problems: what other packages import from it."""

from __future__ import annotations

from solver.problems.files import (
    MAX_PROBLEM_BYTES,
    LoadedProblem,
    Problem,
    input_error,
    load_problem,
    normalise_statement,
    read_checked_text,
    read_problem,
    statement_digest,
)
from solver.problems.sets import FORMATS, load_problem_set, parse_mapping

__all__ = [
    "FORMATS",
    "MAX_PROBLEM_BYTES",
    "LoadedProblem",
    "Problem",
    "input_error",
    "load_problem",
    "load_problem_set",
    "normalise_statement",
    "parse_mapping",
    "read_checked_text",
    "read_problem",
    "statement_digest",
]
