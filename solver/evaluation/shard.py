"""One problem set over many machines: ``solver eval SET --shard K/N`` runs the K-th of N
deterministic parts of the set's runs, and ``solver eval merge OUT`` scores, writes and
audits the whole set once every part has finished.

The split: the set's runs in the evaluation's own order (run 1 of every problem in the set's
order, then run 2, ...) are numbered from 0, and run i belongs to shard ``i mod N``. The order
depends only on the set file, which the output directory's EVAL.json pins by its digest, so
every machine computes the same split; shards differ in size by at most one run. K counts from
0, as a Kubernetes Indexed Job's ``JOB_COMPLETION_INDEX`` does (a Slurm array is declared
``--array=0-(N-1)``).

On shared storage, machines never write the same file except by rename:

- each run has its own directory (``OUT/<problem>/run-<n>``), written by one shard only;
- ``OUT/EVAL.json`` (the evaluation's identity and settings) is created once, exclusively, by
  hard-linking a finished temp file into place (the first shard wins; the others check theirs
  against it), and later rewritten only by rename;
- each shard writes ``OUT/shards/K-of-N.json`` (atomic rename), the state of its runs when it
  ended;
- no shard writes results.json/.md/.png: ``solver eval merge`` does, once.

A shard that died is continued by running the same command again: its finished runs are left
as they are and its unfinished ones resume.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solver._util.fs import temp_name, write_atomic
from solver.audit import audit_run
from solver.config import Settings
from solver.errors import InputError
from solver.evaluation.evaluate import (
    EVAL_FILE,
    EVAL_FORMAT,
    Job,
    JobResult,
    directory_names,
    eval_settings,
    file_digest,
    finished_result,
    looks_finished,
)
from solver.evaluation.output import Written
from solver.evaluation.scores import EvalSummary
from solver.evaluation.set_run import SetPlan, write_set_results
from solver.problems import Problem, load_problem_set

__all__ = [
    "SHARDS_DIR",
    "MergeReport",
    "Shard",
    "claim_eval_file",
    "merge_set",
    "shard_jobs",
    "write_shard_state",
]

SHARDS_DIR = "shards"
_MAX_SHARDS = 100_000
_SPEC = re.compile(r"^(\d{1,6})/(\d{1,6})$")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (0 <= index < count)."""

    index: int
    count: int

    @staticmethod
    def parse(text: str) -> Shard:
        """``K/N``; InputError (exit 2) for anything else."""
        found = _SPEC.match(text.strip())
        if not found:
            raise InputError(f"--shard {text!r}: expected K/N, e.g. 0/4 (K counts from 0)")
        index, count = int(found.group(1)), int(found.group(2))
        if not 1 <= count <= _MAX_SHARDS or not 0 <= index < count:
            raise InputError(f"--shard {text}: K must be 0 to N-1 and N 1 to {_MAX_SHARDS}")
        return Shard(index, count)

    @property
    def name(self) -> str:
        return f"{self.index}-of-{self.count}"


def shard_jobs(jobs: Sequence[Job], shard: Shard) -> tuple[Job, ...]:
    """The runs of ``shard``: the i-th run of the evaluation's order when i mod N is K."""
    return tuple(job for i, job in enumerate(jobs) if i % shard.count == shard.index)


def claim_eval_file(out_dir: Path, identity: dict[str, Any], kind: str) -> None:
    """Create ``OUT/EVAL.json`` exclusively when no shard has yet (a hard link of a complete
    temp file: it appears whole or not at all, and only the first link succeeds), so shards
    that start at the same moment on shared storage agree on one. Its content is what the
    first plain ``solver eval`` invocation writes, minus the settings and extras, which
    :func:`~solver.evaluation.evaluate.prepare_out` adds and checks right after."""
    path = out_dir / EVAL_FILE
    if path.is_file():
        return
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir}: exists and is not a directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    others = [p for p in out_dir.iterdir() if not p.name.startswith(".")]
    if others and not path.exists():
        raise InputError(f"{out_dir}: not empty and not an evaluation; use another --out")
    data = {
        "format": EVAL_FORMAT,
        "kind": kind,
        "input": identity,
        "dirs": directory_names(list(identity["items"])),
    }
    tmp = temp_name(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            os.write(fd, json.dumps(data, indent=2, sort_keys=True).encode() + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        # another shard may have been first: prepare_out then checks ours against its file
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_shard_state(out_dir: Path, shard: Shard, results: Sequence[JobResult]) -> Path:
    """``OUT/shards/K-of-N.json``: each of the shard's runs and its state when it ended."""
    folder = out_dir / SHARDS_DIR
    folder.mkdir(exist_ok=True)
    runs = [
        {
            "problem": r.job.key,
            "run": r.job.run,
            "run_dir": str(r.job.run_dir.relative_to(out_dir)),
            "status": r.status,
            "grade": r.grade,
        }
        for r in results
    ]
    data = {"shard": shard.index, "count": shard.count, "runs": runs}
    path = folder / f"{shard.name}.json"
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True).encode() + b"\n")
    return path


@dataclass(frozen=True)
class MergeReport:
    """What ``solver eval merge`` found: the runs not finished (with the shard that owns
    each, for N shards as the shard files say), and the runs whose audit failed."""

    plan: SetPlan
    summary: EvalSummary
    written: Written
    finished: int
    unfinished: tuple[tuple[Job, int | None], ...]
    audit_failed: tuple[tuple[Job, str], ...]


def _load_eval(out_dir: Path) -> dict[str, Any]:
    path = out_dir / EVAL_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{out_dir}: no readable {EVAL_FILE} ({exc})") from None
    if not isinstance(data, dict) or data.get("kind") != "set":
        raise InputError(f"{out_dir}: not the output directory of `solver eval SET`")
    return data


def _shard_count(out_dir: Path) -> int | None:
    """N, when every shard file in OUT/shards agrees on one."""
    counts = set()
    for path in (out_dir / SHARDS_DIR).glob("*-of-*.json"):
        found = re.fullmatch(r"\d+-of-(\d+)\.json", path.name)
        if found:
            counts.add(int(found.group(1)))
    return counts.pop() if len(counts) == 1 else None


def merge_set(out_dir: Path, set_path: Path | None = None) -> MergeReport:
    """Score every finished run of the evaluation in ``out_dir``, write results.json, .md and
    .png as a one-machine ``solver eval`` would, and audit every run. ``set_path`` replaces
    the set path EVAL.json names (the set may sit elsewhere on the merging machine); its
    digest must be the one EVAL.json pins."""
    data = _load_eval(out_dir)
    recorded = data.get("input") or {}
    path = set_path or Path(str(data.get("set_path", "")))
    if not path.is_file():
        raise InputError(f"{path}: the set file is not here; give it with --set")
    digest = file_digest(path)
    if digest != recorded.get("digest"):
        raise InputError(f"{path}: not the set {out_dir} was evaluated on (digest differs)")
    problems: list[Problem] = list(load_problem_set(path).problems)
    if [p.id for p in problems] != recorded.get("items"):
        raise InputError(f"{path}: its problems are not those of {out_dir}")
    runs = int(data.get("runs", 1))
    names: dict[str, str] = data["dirs"]
    jobs = tuple(
        Job(p.id, n, out_dir / names[p.id] / f"run-{n}", p)
        for n in range(1, runs + 1)
        for p in problems
    )
    settings = _recorded_settings(data.get("settings") or {})
    count = _shard_count(out_dir)
    results: list[JobResult] = []
    unfinished: list[tuple[Job, int | None]] = []
    failed: list[tuple[Job, str]] = []
    for i, job in enumerate(jobs):
        result = finished_result(job.run_dir) if looks_finished(job.run_dir) else None
        if result is None:
            unfinished.append((job, i % count if count else None))
            results.append(JobResult(job, "unfinished", {}, error="not finished"))
            continue
        results.append(JobResult(job, "finished", result, skipped=True))
        report = audit_run(job.run_dir)
        if not report.ok:
            first = next((c for c in report.checks if c.status == "fail"), None)
            failed.append((job, f"{first.name}: {first.detail}" if first else "failed"))
    graders = int((data.get("settings") or {}).get("graders", settings.grading.evaluation_graders))
    plan = SetPlan(path, out_dir, tuple(problems), runs, graders, digest, jobs)
    summary, written = write_set_results(plan, results, settings)
    return MergeReport(
        plan, summary, written, len(jobs) - len(unfinished), tuple(unfinished), tuple(failed)
    )


def _recorded_settings(recorded: dict[str, Any]) -> Settings:
    """The grading settings EVAL.json recorded (how the header says grades were made)."""
    keys = {
        "graders": "grading.evaluation_graders",
        "aggregation": "grading.aggregation",
        "reconcile": "grading.reconcile",
        "reconcile_spread": "grading.reconcile_spread",
        "scale": "grading.scale",
    }
    flags = {key: recorded[name] for name, key in keys.items() if recorded.get(name) is not None}
    return eval_settings(None, flags).settings
