"""Scores of an evaluation and agreement with human graders: pure functions, no I/O.

Two grading policies are reported side by side, since a partial-credit score and a
completion score answer different questions (docs/eval.md):

- rubric: the evaluation grade of the run's final proof (0-7: the graders' grades in evaluation
  mode, re-judged when they disagree, aggregated by the minimum, the median or the mean; on
  the ProofBench scale one of 7/6/1/0), scaled to the problem's points;
- strict: the full points only for a complete proof (an evaluation grade of 7), otherwise 0,
  the completion standard of the IMO 2026 audits, where no partial credit is manufactured.

A run without a final proof (failed, or no candidate) scores 0 under both. So does a final
proof whose grade could not be read (its graders truncated or unparsed): it is "ungraded",
counted as 0 in every total and labelled as such wherever it is shown.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

FULL_GRADE = 7


RunStatus = Literal["finished", "unfinished", "error"]


@dataclass(frozen=True)
class RunScore:
    problem_id: str
    run: int  # 1-based
    run_dir: str
    status: RunStatus
    points: int  # the problem's maximum
    outcome: str | None = None
    grade: float | None = None  # the evaluation grade, 0-7 (a mean of grades may be fractional)
    grader_scores: tuple[int | None, ...] = ()  # each grader's first grade
    rejudged: tuple[int | None, ...] = ()  # each grader's second grade, when it re-judged
    reconciled: bool = False
    aggregation: str | None = None  # how the graders' last grades made ``grade``
    answer: str | None = None  # the short-answer check's verdict, for sets with answers
    tokens: int = 0
    wall_s: float = 0.0
    error: str = ""
    has_proof: bool = False  # the run selected a final proof

    @property
    def finished(self) -> bool:
        return self.status == "finished"

    @property
    def ungraded(self) -> bool:
        """A final proof without a readable grade: scores 0, but is not "no proof"."""
        return self.finished and self.has_proof and self.grade is None

    @property
    def rubric(self) -> float:
        if self.grade is None:
            return 0.0
        return round(self.grade * self.points / FULL_GRADE, 3)

    @property
    def strict(self) -> int:
        return self.points if self.grade == FULL_GRADE else 0

    def last_grade(self, k: int) -> int | None:
        """Grader ``k``'s last grade: its re-judged one when it gave one, else its first."""
        second = self.rejudged[k] if k < len(self.rejudged) else None
        first = self.grader_scores[k] if k < len(self.grader_scores) else None
        return second if second is not None else first

    def to_json(self) -> dict[str, Any]:
        return {
            "problem": self.problem_id,
            "run": self.run,
            "run_dir": self.run_dir,
            "status": self.status,
            "outcome": self.outcome,
            "grade": self.grade,
            "ungraded": self.ungraded,
            "grader_scores": list(self.grader_scores),
            "rejudged": list(self.rejudged),
            "reconciled": self.reconciled,
            "aggregation": self.aggregation,
            "answer": self.answer,
            "points": self.points,
            "rubric": self.rubric,
            "strict": self.strict,
            "tokens": self.tokens,
            "wall_s": self.wall_s,
            "error": self.error,
        }


def score_from_result(
    problem_id: str, run: int, run_dir: str, points: int, result: dict[str, Any]
) -> RunScore:
    """The score of a finished run from its final/result.json."""
    evaluation = result.get("evaluation") or {}
    grade = result.get("evaluation_score")
    has_proof = result.get("selected") is not None
    if not has_proof:
        grade = None  # no final proof: nothing was graded
    return RunScore(
        problem_id=problem_id,
        run=run,
        run_dir=run_dir,
        status="finished",
        points=points,
        outcome=result.get("outcome"),
        grade=_grade(grade),
        grader_scores=_grades(evaluation.get("scores")),
        rejudged=_grades(evaluation.get("rejudged")),
        reconciled=bool(evaluation.get("reconciled")),
        aggregation=evaluation.get("aggregation"),
        answer=(result.get("answer_check") or {}).get("verdict"),
        tokens=int((result.get("tokens") or {}).get("total", 0)),
        wall_s=float(result.get("wall_s") or 0.0),
        has_proof=has_proof,
    )


def _grade(value: object) -> float | None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    return int(value) if float(value).is_integer() else float(value)


def _grades(values: object) -> tuple[int | None, ...]:
    if not isinstance(values, list | tuple):
        return ()
    return tuple(
        int(g) if isinstance(g, int | float) and not isinstance(g, bool) else None for g in values
    )


def _points_of(run: RunScore, grade: float | None) -> float:
    return 0.0 if grade is None or not run.has_proof else grade * run.points / FULL_GRADE


@dataclass(frozen=True)
class Spread:
    """Mean, range and (population) standard deviation of a few numbers."""

    n: int
    mean: float
    low: float
    high: float
    sd: float

    def to_json(self) -> dict[str, float | int]:
        return {
            "n": self.n,
            "mean": round(self.mean, 3),
            "min": self.low,
            "max": self.high,
            "sd": round(self.sd, 3),
        }


def spread(values: Sequence[float]) -> Spread | None:
    if not values:
        return None
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return Spread(len(values), mean, min(values), max(values), sd)


@dataclass(frozen=True)
class ProblemSummary:
    problem_id: str
    points: int
    runs: tuple[RunScore, ...]

    @property
    def finished(self) -> list[RunScore]:
        return [r for r in self.runs if r.finished]

    @property
    def strict(self) -> Spread | None:
        return spread([r.strict for r in self.finished])

    @property
    def rubric(self) -> Spread | None:
        return spread([r.rubric for r in self.finished])


@dataclass(frozen=True)
class RunTotal:
    run: int
    complete: bool  # every problem's run n has finished
    strict: int
    rubric: float


@dataclass(frozen=True)
class EvalSummary:
    problems: tuple[ProblemSummary, ...]
    runs: int
    totals: tuple[RunTotal, ...]

    @property
    def max_total(self) -> int:
        return sum(p.points for p in self.problems)

    @property
    def complete_totals(self) -> list[RunTotal]:
        return [t for t in self.totals if t.complete]

    @property
    def strict_total(self) -> Spread | None:
        return spread([t.strict for t in self.complete_totals])

    @property
    def rubric_total(self) -> Spread | None:
        return spread([t.rubric for t in self.complete_totals])

    @property
    def grader_count(self) -> int:
        return max((len(r.grader_scores) for p in self.problems for r in p.runs), default=0)

    def grader_totals(self) -> list[Spread | None]:
        """Per grader (by position): the set's rubric total over the complete runs had that
        grader's last grade alone counted; what each model family would have reported."""
        out: list[Spread | None] = []
        for k in range(self.grader_count):
            totals = []
            for total in self.complete_totals:
                runs = [p.runs[total.run - 1] for p in self.problems]
                totals.append(round(sum(_points_of(r, r.last_grade(k)) for r in runs), 3))
            out.append(spread(totals))
        return out

    @property
    def unfinished(self) -> list[RunScore]:
        return [r for p in self.problems for r in p.runs if not r.finished]

    @property
    def ungraded(self) -> list[RunScore]:
        return [r for p in self.problems for r in p.runs if r.ungraded]


def summarise(
    problems: Sequence[tuple[str, int]], scores: Sequence[RunScore], runs: int
) -> EvalSummary:
    """Group run scores by problem (in the set's order) and total them per run index."""
    by_key = {(s.problem_id, s.run): s for s in scores}
    summaries = []
    for problem_id, points in problems:
        found = tuple(
            by_key.get((problem_id, n))
            or RunScore(
                problem_id=problem_id, run=n, run_dir="", status="unfinished", points=points
            )
            for n in range(1, runs + 1)
        )
        summaries.append(ProblemSummary(problem_id, points, found))
    totals = []
    for n in range(1, runs + 1):
        of_run = [p.runs[n - 1] for p in summaries]
        totals.append(
            RunTotal(
                run=n,
                complete=all(r.finished for r in of_run),
                strict=sum(r.strict for r in of_run),
                rubric=round(sum(r.rubric for r in of_run), 3),
            )
        )
    return EvalSummary(tuple(summaries), runs, tuple(totals))


# ---------------------------------------------------------------- agreement with humans


@dataclass(frozen=True)
class Disagreement:
    item: str
    human: float
    model: float

    @property
    def difference(self) -> float:
        return self.model - self.human


@dataclass(frozen=True)
class Agreement:
    n: int
    exact: float  # share of items where the grades are equal
    within_one: float  # share where they differ by at most one point
    pearson: float | None  # None when either side has no variance (or n < 2)
    spearman: float | None
    mean_abs_error: float
    bias: float  # mean of model - human: positive when the model grades more leniently
    disagreements: tuple[Disagreement, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "exact": round(self.exact, 4),
            "within_one": round(self.within_one, 4),
            "pearson": None if self.pearson is None else round(self.pearson, 4),
            "spearman": None if self.spearman is None else round(self.spearman, 4),
            "mean_abs_error": round(self.mean_abs_error, 4),
            "bias": round(self.bias, 4),
            "disagreements": [
                {"item": d.item, "human": d.human, "model": d.model, "difference": d.difference}
                for d in self.disagreements
            ],
        }


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    n = len(xs)
    if n < 2 or n != len(ys):
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    return sxy / math.sqrt(sxx * syy)


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks; tied values share the mean of their ranks."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def agreement(pairs: Sequence[tuple[str, float, float]]) -> Agreement:
    """Agreement of model grades with human grades over ``(item, human, model)`` triples."""
    if not pairs:
        raise ValueError("no graded items to compare")
    humans = [float(h) for _, h, _ in pairs]
    models = [float(m) for _, _, m in pairs]
    n = len(pairs)
    diffs = [m - h for h, m in zip(humans, models, strict=True)]
    return Agreement(
        n=n,
        exact=sum(d == 0 for d in diffs) / n,
        within_one=sum(abs(d) <= 1 for d in diffs) / n,
        pearson=pearson(humans, models),
        spearman=pearson(ranks(humans), ranks(models)),
        mean_abs_error=sum(abs(d) for d in diffs) / n,
        bias=sum(diffs) / n,
        disagreements=tuple(
            Disagreement(item, float(h), float(m)) for item, h, m in pairs if float(h) != float(m)
        ),
    )
