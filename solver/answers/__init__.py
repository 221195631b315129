"""The face of solver.answers: what other packages import from it."""

from __future__ import annotations

from solver.answers.check import AnswerCheck, answer_key, check_answer, extract_final_answer

__all__ = [
    "AnswerCheck",
    "answer_key",
    "check_answer",
    "extract_final_answer",
]
