"""The sympy answer check, on pairs built from IMO-AnswerBench short answers (CC-BY 4.0, see
tests/answers/data/README.md)."""

from __future__ import annotations

import csv
import json
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solver.answers import AnswerCheck, check_answer, extract_final_answer

DATA = Path(__file__).parent / "data" / "answerbench-answers.csv"
with DATA.open(newline="", encoding="utf-8") as handle:
    REFERENCE = {row["Problem ID"]: row["Short Answer"] for row in csv.DictReader(handle)}

EQ, NEQ, UNDECIDED = "equivalent", "not_equivalent", "undecided"

# (problem id, candidate answer, expected verdict against the reference short answer)
PAIRS: list[tuple[str, str, str]] = [
    ("algebra-001", "$3$", EQ),
    ("algebra-001", "N = 3", EQ),
    ("algebra-001", r"\boxed{4}", NEQ),
    ("algebra-002", r"1+\lfloor\log_2 a\rfloor", EQ),
    ("algebra-002", r"\lceil \log_2 a \rceil", NEQ),
    ("algebra-002", r"\lfloor \log_{2} a \rfloor", NEQ),
    ("algebra-003", r"g(x) = -2x^3 + c \text{ and } g(x) = 2x^3 + c", EQ),
    ("algebra-003", r"g(x)=2x^3+c", NEQ),
    ("algebra-008", "-2023/4096576", EQ),
    ("algebra-008", r"\frac{2023}{2024^2}", NEQ),
    ("algebra-009", r"\sqrt[3]{\frac{1568}{13}}", EQ),
    ("algebra-009", r"2\sqrt[3]{\frac{169}{13}}", NEQ),
    ("algebra-010", r"0, \pm\frac{2}{3}", EQ),
    ("algebra-010", r"\{-2/3, 2/3\}", NEQ),
    ("algebra-011", "-2(m-1)", EQ),
    ("algebra-011", "2-m", NEQ),
    ("algebra-011", "2-2n", UNDECIDED),  # another variable: not provably different
    ("algebra-013", r"Q(x)=2x-2 \text{ or } Q(x)=-2", EQ),
    ("algebra-013", "Q(x)=2x-2", NEQ),
    ("algebra-017", r"\{\tfrac12\} \cup (-\infty, 0)", EQ),
    ("algebra-017", r"(-\infty, 0]", NEQ),
    ("algebra-018", "2030, 2026", EQ),
    ("algebra-018", r"\{2026\}", NEQ),
    ("algebra-024", r"\{1, 2, \dots, 1235\}", EQ),
    ("algebra-024", r"1,2,\ldots,1234", NEQ),
    ("algebra-025", "A(x)=1+2x, A(x)=1-x^2, A(x)=1-x", EQ),
    ("algebra-025", "A(x)=1-x, A(x)=1+2x", NEQ),
    ("algebra-027", r"(-\infty,-4) \cup (-4,-8/3)", EQ),
    ("algebra-027", r"(-\infty,-8/3)", NEQ),
    ("algebra-028", r"x \le 0", EQ),
    ("algebra-028", r"(-\infty, 0)", NEQ),
    ("algebra-033", "(4,1,2,5,134,718240)", EQ),
    ("algebra-033", "(1,4,2,5,134,718240)", NEQ),
    ("algebra-035", "f(x)=0, f(x)=-1, f(x)=2x^2+bx", EQ),
    ("algebra-035", "f(x) = 0, f(x) = -1", NEQ),
    ("algebra-048", r"-6 \le x \le 5", EQ),
    ("algebra-048", "(-6,5]", NEQ),
    ("algebra-049", r"\dfrac{16}{27}", EQ),
    ("algebra-049", "0.5926", NEQ),
    ("algebra-051", "all odd integers n", EQ),
    ("algebra-051", "n = 2k+1", EQ),
    ("algebra-051", "even $n$", NEQ),
    ("algebra-066", "995018, 995026, 997008", EQ),
    ("algebra-066", "997008, 995026", NEQ),
    ("algebra-070", "0.25", EQ),
    ("algebra-070", r"\frac14", EQ),
    ("algebra-070", r"\frac{1}{2}", NEQ),
    ("algebra-072", r"[-\frac{6}{5}, \infty)", EQ),
    ("algebra-072", "x > -6/5", NEQ),
    ("algebra-096", r"4 \times 3^{2023}", EQ),
    ("algebra-096", "3^{2024}+3^{2023}", EQ),
    ("algebra-096", r"4\cdot 3^{2024}", NEQ),
    ("algebra-099", "P(n) = n^2 + 4an + 2a^2 for some nonnegative integer a", EQ),
    ("algebra-099", "P(n)=(n+2a)^2+2a^2 for some nonnegative integer a", NEQ),
    ("algebra-099", "P(n)=(n+2a)^2-2a^2", UNDECIDED),  # the condition on a is missing
    ("combinatorics-015", "61917364224", EQ),
    ("combinatorics-015", "12^{11}", NEQ),
    ("combinatorics-059", "Taking the empty card.", EQ),
    ("combinatorics-059", "taking the full card", UNDECIDED),  # prose is only ever matched
    (
        "combinatorics-098",
        r"1 + 15\lambda + 91\lambda^2 + 286\lambda^3 + 495\lambda^4 + 462\lambda^5"
        r" + 210\lambda^6 + 36\lambda^7 + \lambda^8",
        EQ,
    ),
    (
        "combinatorics-098",
        r"\lambda^8 + 36\lambda^7 + 210\lambda^6 + 462\lambda^5 + 495\lambda^4"
        r" + 286\lambda^3 + 91\lambda^2 + 16\lambda + 1",
        NEQ,
    ),
    ("geometry-082", r"\sqrt{\frac{5}{2}}", EQ),
    ("geometry-082", r"\frac{\sqrt{5}}{2}", NEQ),
    ("geometry-087", r"\frac{3\sqrt{15}}{10}", EQ),
    ("geometry-087", r"\frac{3\sqrt{5}}{10}", NEQ),
    ("geometry-089", r"\frac{96}{13}\sqrt{10}", EQ),
    ("geometry-089", r"\frac{96\sqrt{10}}{31}", NEQ),
    ("number_theory-005", r"\mathbb Z", EQ),
    ("number_theory-009", r"1 \text{ and all odd primes}", EQ),
    ("number_theory-009", r"1 \text{ and all even primes}", UNDECIDED),
    ("number_theory-012", r"n \geq 2", EQ),
    ("number_theory-012", "n > 2", NEQ),
    ("number_theory-030", "n+n+n", EQ),
    ("number_theory-030", "3n+1", NEQ),
    ("number_theory-048", r"\{(a,b) : ab \le e^3\}", EQ),
    ("number_theory-060", r"\frac{2025^{101}+2025^2+2026}{2026}", EQ),
    ("number_theory-060", r"\frac{2025^{101}+2025^2+2025-1}{2026}", NEQ),
    ("number_theory-072", "(5, 3, 7)", EQ),
    ("number_theory-072", "(5, 7, 3)", NEQ),
    ("number_theory-084", r"-3 \text{ and } 5", EQ),
    ("number_theory-084", "5", NEQ),
    ("number_theory-088", "820", EQ),
    ("number_theory-088", "821", NEQ),
]


def test_the_fixture_and_the_pairs_cover_enough() -> None:
    assert len(REFERENCE) == 41
    assert {f"imo-bench-{pid}" for pid, _, _ in PAIRS} <= set(REFERENCE)
    assert sum(1 for *_, v in PAIRS if v == EQ) >= 20
    assert sum(1 for *_, v in PAIRS if v == NEQ) >= 20


@pytest.mark.parametrize(("problem", "candidate", "expected"), PAIRS)
def test_answer_pairs(problem: str, candidate: str, expected: str) -> None:
    result = check_answer(candidate, REFERENCE[f"imo-bench-{problem}"])
    assert result.verdict == expected, result.detail
    assert result.detail


def test_every_reference_is_equivalent_to_itself() -> None:
    for answer in REFERENCE.values():
        assert check_answer(answer, answer).verdict == EQ, answer


REFERENCE_PHI = REFERENCE["imo-bench-algebra-097"]  # "... where \varphi = ..."
REFERENCE_STEP = REFERENCE["imo-bench-number_theory-016"]


@pytest.mark.parametrize(
    ("candidate", "reference", "expected"),
    [
        (r"n \equiv 3 \pmod 4", "$n=4k+3$", EQ),
        ("All numbers of the form $4k+3$", "$n=4k+3$", EQ),
        ("n=4k+1", "$n=4k+3$", NEQ),
        ("There are none", "no solutions", EQ),
        ("1/2", "0.5", EQ),
        ("2^{2024}-1", "$2^{2024}+1$", NEQ),  # huge numbers are compared exactly
        (r"180^\circ - 2\alpha", r"$180 - 2\alpha$", EQ),
        ("ρ/R", r"$\frac{\rho}{R}$", EQ),
        (r"\frac{(2k)!}{2^k k!}", "$(2k-1)!!$", EQ),
        (r"\left(\frac{(2k)!}{(k!)^2}\right)^2", r"$\binom{2k}{k}^2$", EQ),
        ("x=3", "3", EQ),
        ("", "3", UNDECIDED),
        ("3", "  ", UNDECIDED),
        ("10^{10^{10^{10}}}", "3", UNDECIDED),  # refused before evaluation, not computed
        ("(0, 4/9]", r"$0 < k \le \frac{4}{9}$", EQ),
        ("__import__('os').system('true')", "3", UNDECIDED),
        (r"c \in (0,1)", "$0<c<1$", EQ),
        (r"\lfloor \frac{1+\sqrt5}{2} n \rfloor", REFERENCE_PHI, EQ),  # "where" defines phi
        (r"\lfloor 2n \rfloor", REFERENCE_PHI, NEQ),
        (r"g(x)=\lceil x\rceil, g(x)=\lfloor x \rfloor", REFERENCE_STEP, NEQ),
        (r"g(x)=\lfloor x \rfloor, g(x)=c, g(x)=\lceil x\rceil", REFERENCE_STEP, EQ),
        ("All powers of two", "All powers of 2", EQ),
        ("1.7", "1.75", NEQ),
        # n names an integer: equal on the integers, different on the reals -> undecided
        ("n > 1", r"$n \ge 2$", UNDECIDED),
        (r"n \ge 3", r"$n \ge 2$", NEQ),
        (r"0 < k \le \frac{4}{10}", r"$0 < k \le \frac{4}{9}$", NEQ),  # no integer inside
        ("all n \\ge 2", r"$n \ge 2$", EQ),
        ("every positive integer", "All positive integers", EQ),
    ],
)
def test_more_forms(candidate: str, reference: str, expected: str) -> None:
    assert check_answer(candidate, reference).verdict == expected


def test_the_deadline_gives_undecided() -> None:
    """A check that cannot finish in time reports so instead of blocking the caller."""
    result = check_answer(r"\frac{(2k)!}{2^k k!}", "$(2k-1)!!$", timeout_s=0.0)
    assert result == AnswerCheck("undecided", "the check did not finish within 0 s")


def _checkers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "answer-check" and t.is_alive()]


def test_no_threads_are_left_behind_by_a_normal_check() -> None:
    for lingering in _checkers():  # from the deadline test, which does not wait for its worker
        lingering.join(60)
    check_answer("2", "2")
    assert not _checkers()


@settings(max_examples=60, deadline=None)
@given(candidate=st.text(max_size=60), reference=st.sampled_from(sorted(REFERENCE.values())))
def test_check_never_raises(candidate: str, reference: str) -> None:
    result = check_answer(candidate, reference, timeout_s=5.0)
    assert result.verdict in (EQ, NEQ, UNDECIDED)


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        (
            "## Proof\nSo \\boxed{3} here.\n\n## Final answer\n\n$\\boxed{\\frac{1}{2}}$\n\n"
            "## Self-assessment\nStatus: complete",
            "\\frac{1}{2}",
        ),
        ("hence \\boxed{\\{1,\\{2\\}\\}} and finally \\boxed{x^{2}}.", "x^{2}"),
        ("Thus.\n**Final answer:** 2026, 2030\n", "2026, 2030"),
        ("## Final answer\n\nAll odd $n$.\n", "All odd $n$."),
        ("## Final answer\nNot applicable\n## Self-assessment\nok", None),
        ("\\boxed{unclosed", None),
        ("No answer here.", None),
        ("", None),
    ],
)
def test_extract_final_answer(text: str, answer: str | None) -> None:
    assert extract_final_answer(text) == answer


def test_the_answer_check_catches_the_known_false_positive() -> None:
    """DeepSeekMath-V2's IMO 2025 P6 proof passed every automatic verification and scored 0
    with humans; its final answer differs from the reference. P1 and P3 (7/7) agree."""
    path = DATA.parent / "dsm-v2-imo2025-tails.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    verdicts = {}
    for row in rows:
        candidate = extract_final_answer(row["proof_tail"])
        assert candidate is not None, row["problem_idx"]
        verdicts[row["problem_idx"]] = check_answer(candidate, row["answer"]).verdict
    assert verdicts == {"IMO2025-1": EQ, "IMO2025-3": EQ, "IMO2025-6": NEQ}
    p6 = next(row for row in rows if row["problem_idx"] == "IMO2025-6")
    assert p6["average_automatic_rating"] == 1.0 and p6["human_rating"] == 0
