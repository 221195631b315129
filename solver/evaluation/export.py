"""`solver eval proofs SOURCE... --out FILE`: a run's own proofs, written for humans to grade.

A calibration (`solver eval calibrate`) measures the verifier, the reviewer and the selector
against human grades; it needs several proofs per problem written by the model it calibrates,
some right and some wrong. The runs of that model hold exactly those: every lineage's versions.
This module writes them as calibrate's generic JSON Lines, one proof a line, with an empty
``human_grade`` for a person to fill in.

What a line shows a grader is what a grader may see: the problem, its reference solution and
grading guidelines where the problem has them, and the proof. The machine's verdicts, grades
and choices stay out of the file, and lines are ordered by problem and then by the proof's
digest, so neither the content nor the order says which proof the run accepted or selected.
``source`` names where each proof came from (run, lineage, version), for the record.

A proof is written once per problem however many runs or versions hold the same bytes.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from solver._util.terminal import one_line
from solver.errors import InputError, NotFound, RunCorrupt
from solver.evaluation.evaluate import EVAL_FILE
from solver.loop.state import RunState
from solver.problems import Problem, read_checked_text
from solver.report import policy_of_run, search_view
from solver.run import read_manifest, read_state
from solver.store import parse_digest, write_atomic

__all__ = [
    "EXPORT_CHOICES",
    "ExportedProof",
    "ProofExport",
    "collect_proofs",
    "grading_sheet",
    "write_proofs",
]

Which = Literal["chosen", "all"]
EXPORT_CHOICES: tuple[Which, ...] = ("chosen", "all")
MAX_EVAL_FILE_BYTES = 16 * 1024 * 1024
# A directory name an EVAL.json may give: one component, no way out of the evaluation.
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# The versions worth a grader's time: a proof that can be verified. ("unusable" is a reviser
# output that was not a standalone proof.)
_GRADABLE = ("open", "failed", "accepted")


@dataclass
class ExportedProof:
    problem: Problem
    text: str
    sha256: str
    sources: list[dict[str, Any]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.problem.id}-{self.sha256[:12]}"

    def row(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "human_grade": None,
            "max_points": self.problem.points,
            "problem": self.problem.statement,
            "reference_solution": self.problem.reference_solution,
            "grading_guidelines": self.problem.grading_guidelines,
            "proof": self.text,
            "source": self.sources,
        }


@dataclass
class ProofExport:
    proofs: list[ExportedProof]
    runs: int
    unfinished: int  # runs read before they finished (their proofs so far)

    @property
    def problems(self) -> int:
        return len({p.problem.digest for p in self.proofs})


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def run_dirs(source: Path) -> list[Path]:
    """The run directories SOURCE stands for: itself when it is a run, the runs an evaluation
    made when it holds EVAL.json (those started so far), an InputError otherwise."""
    if not source.is_dir():  # the user's own path may be a link; names found inside may not
        raise NotFound(f"{source}: not a directory")
    if (source / "MANIFEST.json").is_file():
        return [source]
    eval_file = source / EVAL_FILE
    if not eval_file.is_file():
        raise InputError(f"{source}: neither a run (MANIFEST.json) nor an evaluation ({EVAL_FILE})")
    _, text = read_checked_text(eval_file, extensions=(".json",), max_bytes=MAX_EVAL_FILE_BYTES)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{eval_file}: not JSON ({exc})") from None
    names = data.get("dirs") if isinstance(data, dict) else None
    if not isinstance(names, dict):
        raise InputError(f'{eval_file}: no "dirs" object naming the evaluation\'s runs')
    for name in names.values():
        if not isinstance(name, str) or not _SAFE_NAME.match(name):
            shown = one_line(repr(name), 200)
            raise InputError(f"{eval_file}: {shown} is not a directory name of this evaluation")
    found: list[Path] = []
    for name in sorted(set(names.values())):
        item = source / name
        if not _is_dir(item):
            continue  # not started yet
        if (item / "MANIFEST.json").is_file():
            found.append(item)  # a calibration's grading run
            continue
        # a set's runs: ITEM/run-N
        runs = [p for p in item.iterdir() if re.fullmatch(r"run-\d+", p.name) and _is_dir(p)]
        found.extend(
            sorted(
                (p for p in runs if (p / "MANIFEST.json").is_file()),
                key=lambda p: int(p.name[4:]),
            )
        )
    return found


def _chosen_versions(state: RunState, resolved: dict[str, object]) -> set[tuple[str, int]]:
    """Every accepted version, each lineage's best (as the run's own policy counts it) and the
    selected one; each lineage's latest version where the run's settings no longer read."""
    chosen: set[tuple[str, int]] = set()
    for lineage in state.lineages.values():
        if lineage.accepted_version is not None:
            chosen.add((lineage.lineage, lineage.accepted_version))
    try:
        view = search_view(state, policy_of_run(resolved))
    except (ValidationError, InputError):
        for lineage in state.lineages.values():
            if lineage.latest is not None:
                chosen.add((lineage.lineage, lineage.latest.version))
    else:
        chosen.update((v.lineage, v.version) for v in view.versions if v.best)
    if state.selected is not None:
        chosen.add(state.selected)
    return chosen


def _text(run_dir: Path, blob: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:  # the loop stores proofs as UTF-8: this run was altered
        raise RunCorrupt(f"{run_dir}: proof {blob} is not UTF-8 text; run `solver audit`") from None


def collect_proofs(sources: list[Path], which: Which = "chosen") -> ProofExport:
    """The proofs of the runs SOURCES stand for, one per problem and distinct text."""
    by_key: dict[tuple[str, str], ExportedProof] = {}
    runs = unfinished = 0
    seen: set[Path] = set()
    for source in sources:
        for run_dir in run_dirs(source):
            resolved_dir = run_dir.resolve()
            if resolved_dir in seen:
                continue
            seen.add(resolved_dir)
            reader, state = read_state(run_dir)
            manifest = read_manifest(reader.manifest, run_dir)
            problem = manifest.problem.record
            runs += 1
            unfinished += state.phase != "finished"
            chosen = (
                _chosen_versions(state, dict(manifest.config.resolved))
                if which == "chosen"
                else None
            )
            for lineage in sorted(state.lineages.values(), key=lambda ln: ln.index):
                for version in sorted(lineage.versions.values(), key=lambda v: v.version):
                    if version.status not in _GRADABLE or version.proof_artifact is None:
                        continue
                    if version.producer not in state.calls:
                        continue  # given to the run (a calibration's proof and its rivals)
                    if chosen is not None and (lineage.lineage, version.version) not in chosen:
                        continue
                    artifact = state.artifacts[version.proof_artifact]
                    # the blob's name is its SHA-256, which read_blob checks the bytes against;
                    # a text already written is not read again
                    sha = parse_digest(artifact.blob)
                    entry = by_key.get((problem.digest, sha))
                    if entry is None:
                        text = _text(run_dir, artifact.blob, reader.read_blob(artifact.blob))
                        entry = ExportedProof(problem, text, sha)
                        by_key[(problem.digest, sha)] = entry
                    entry.sources.append(
                        {
                            "run": manifest.run_id,
                            "run_dir": str(run_dir),
                            "lineage": lineage.lineage,
                            "version": version.version,
                        }
                    )
    proofs = sorted(by_key.values(), key=lambda p: (p.problem.id, p.problem.digest, p.sha256))
    return ProofExport(proofs, runs, unfinished)


def grading_sheet(export: ProofExport, out_name: str) -> str:
    """The same proofs as Markdown for reading: each problem once, with its reference solution
    and guidelines, then its proofs under the ids of their lines in ``out_name``."""
    parts = [
        "# Proofs to grade\n",
        f"Each proof's heading is the `id` of its line in `{out_name}`: write the grade there, as"
        " `human_grade`. Nothing here says what the machine thought of a proof.\n",
    ]
    problem_digest = None
    for proof in export.proofs:
        problem = proof.problem
        if problem.digest != problem_digest:
            problem_digest = problem.digest
            parts.append(
                f"## Problem {problem.id} ({problem.points} points)\n\n{problem.statement}\n"
            )
            if problem.reference_solution:
                parts.append(f"### Reference solution\n\n{problem.reference_solution}\n")
            if problem.grading_guidelines:
                parts.append(f"### Grading guidelines\n\n{problem.grading_guidelines}\n")
        parts.append(f"---\n\n### Proof `{proof.id}`\n\n{proof.text}\n")
    return "\n".join(parts)


def write_proofs(export: ProofExport, out: Path, sheet: Path | None = None) -> None:
    """FILE, one JSON object a line, and the grading sheet when asked; an existing file is
    never replaced, since it may hold grades a person has already written."""
    for path in (out, sheet):
        if path is not None and os.path.lexists(path):
            raise InputError(f"{path}: exists (it may hold grades already given); choose another")
    if out.suffix != ".jsonl":
        raise InputError(f"{out}: the file calibrate reads ends in .jsonl")
    if sheet is not None and sheet.suffix != ".md":
        raise InputError(f"{sheet}: the grading sheet is Markdown and ends in .md")
    lines = [json.dumps(p.row(), ensure_ascii=False) for p in export.proofs]
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, ("\n".join(lines) + "\n").encode("utf-8") if lines else b"")
    if sheet is not None:
        sheet.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(sheet, grading_sheet(export, out.name).encode("utf-8"))
