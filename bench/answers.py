r"""Benchmark: the answer check with its own LaTeX translator first (as shipped) against sympy's
parse_latex alone, side by side on the same IMO-AnswerBench answers.

Usage: python bench/answers.py [--data CSV]

Two sets of cases, each run once per reader configuration:
- "surface": for every short answer of the CSV (default: the 41-row fixture in
  tests/answers/data; pass the full 400-row imo-answerbench-v2.csv for the published table) two
  restatements (boxed; "The answer is $...$.") that should be equivalent and one perturbation
  (its last integer plus one) that should not;
- "rewritten": the hand-written pairs of tests/answers/test_answers.py (other forms of the same
  answer: 1+\lfloor\log_2 a\rfloor, \frac{(2k)!}{2^k k!}, c \in (0,1), ...), with their
  expected verdicts.
It prints verdict counts, wrong verdicts (equivalent <-> not equivalent) and time per check.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import re
import sys
import time
from collections import Counter
from pathlib import Path

from solver.answers import check_answer
from solver.answers import latex as answer_latex

DEFAULT_DATA = Path(__file__).resolve().parent.parent / "tests/answers/data/answerbench-answers.csv"


def cases(answers: list[str]) -> list[tuple[str, str, str]]:
    """(candidate, reference, expected) triples."""
    out: list[tuple[str, str, str]] = []
    for answer in answers:
        core = answer.strip().strip("$").strip()
        out.append(("\\boxed{" + core + "}", answer, "equivalent"))
        out.append(("The answer is $" + core + "$.", answer, "equivalent"))
        numbers = list(re.finditer(r"\d+", core))
        if numbers:
            last = numbers[-1]
            bumped = core[: last.start()] + str(int(last.group()) + 1) + core[last.end() :]
            out.append((bumped, answer, "not_equivalent"))
    return out


def rewritten_pairs() -> list[tuple[str, str, str]]:
    path = Path(__file__).resolve().parent.parent / "tests/answers/test_answers.py"
    spec = importlib.util.spec_from_file_location("answer_pairs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    reference = module.REFERENCE
    return [(c, reference[f"imo-bench-{p}"], e) for p, c, e in module.PAIRS]


def run(triples: list[tuple[str, str, str]]) -> tuple[Counter[str], float]:
    counts: Counter[str] = Counter()
    started = time.perf_counter()
    for candidate, reference, expected in triples:
        verdict = check_answer(candidate, reference).verdict
        counts[f"{expected}->{verdict}"] += 1
    return counts, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    try:
        with args.data.open(newline="", encoding="utf-8") as handle:
            answers = [row["Short Answer"] for row in csv.DictReader(handle)]
    except (OSError, KeyError) as exc:
        print(f"cannot read {args.data}: {exc}", file=sys.stderr)
        return 2
    suites = {"surface": cases(answers), "rewritten": rewritten_pairs()}
    configurations = {
        "translator, then parse_latex (shipped)": answer_latex.READERS,
        "parse_latex only": (answer_latex._from_parse_latex,),
    }
    shipped_readers = answer_latex.READERS
    header = (
        f"{'cases':10} {'readers':40} {'eq ok':>6} {'eq wrong':>9} {'neq ok':>7} "
        f"{'neq wrong':>10} {'undecided':>10} {'ms/check':>9}"
    )
    print(header)
    print("-" * len(header))
    for suite, triples in suites.items():
        timings = []
        for name, readers in configurations.items():
            answer_latex.READERS = readers
            run(triples[:10])  # warm up sympy's caches and the ANTLR parser
            counts, seconds = run(triples)
            timings.append(seconds)
            undecided = sum(v for k, v in counts.items() if k.endswith("->undecided"))
            print(
                f"{suite:10} {name:40} {counts['equivalent->equivalent']:>6} "
                f"{counts['equivalent->not_equivalent']:>9} "
                f"{counts['not_equivalent->not_equivalent']:>7} "
                f"{counts['not_equivalent->equivalent']:>10} {undecided:>10} "
                f"{1000 * seconds / len(triples):>9.1f}"
            )
        answer_latex.READERS = shipped_readers
        print(f"{suite:10} time ratio shipped / parse_latex only: {timings[0] / timings[1]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
