"""The face of solver.answers: what other packages import from it.

The mathematical check (``check_answer``) loads sympy, which takes about a second, so it is
imported when first used; finding and keying answers (``solver.answers.text``) does not."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from solver.answers.text import answer_key, extract_final_answer

if TYPE_CHECKING:
    from solver.answers.check import AnswerCheck, check_answer

__all__ = [
    "AnswerCheck",
    "answer_key",
    "check_answer",
    "extract_final_answer",
]

_CHECK = frozenset({"AnswerCheck", "check_answer"})


def __getattr__(name: str) -> Any:
    if name in _CHECK:
        from solver.answers import check

        return getattr(check, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
