"""What happened in a run, gathered from its directory alone: the data behind `solver report`.

:func:`load_report` reads the manifest, the journal and the blobs of one run directory (never
anything else, and never the lock) and returns a :class:`RunReport`: the problem, the outcome,
the selected proof, every candidate's lineage, every model call with its tokens and times, a
timeline and per-role totals. It works on an unfinished run too (one that is running, was
killed or was interrupted): the journal so far is folded exactly as resume would fold it.

Renderers: :mod:`solver.report.markdown` (Markdown) and :mod:`solver.report.html` (one
self-contained HTML file).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from solver._util.clock import seconds_between
from solver.loop.state import RunState, reviews_of
from solver.problems import Problem
from solver.records import (
    CallCancelled,
    CallCompleted,
    CallFailed,
    CallPlanned,
    ContextBuilt,
    Decision,
    EndpointProbed,
    GradeFacts,
    LlmAbandoned,
    LlmCompleted,
    LlmFailed,
    LlmStarted,
    LoopRecord,
    RunFinished,
    RunResult,
    SessionEnded,
    SessionStarted,
)
from solver.report.model import (
    CallView,
    EvaluationView,
    LineageView,
    ProblemView,
    RoleTotals,
    RunReport,
    SelectedView,
    TimelineEvent,
    TimelineKind,
    VersionView,
    lineage_children,
)
from solver.run import read_manifest, run_condition, typed_record, wall_seconds
from solver.store import RunReader, StoreError

DEFAULT_MAX_CHARS = 200_000

# Decisions worth a line on the timeline, and how they read.
_DECISION_TEXT = {
    "accepted": "accepted {lineage} v{version}",
    "round_failed": "round failed: {lineage} v{version}",
    "abandoned": "abandoned {lineage}",
    "phase": "phase -> {phase}",
    "budget_exhausted": "budget exhausted",
    "selected": "selected {lineage} v{version}",
}


class _Reader:
    """Blob texts of one run, decoded leniently and capped, never raising."""

    def __init__(self, reader: RunReader, max_chars: int) -> None:
        self.reader = reader
        self.max_chars = max_chars

    def text(self, digest: str) -> str:
        try:
            data = self.reader.read_blob(digest)
        except StoreError as exc:
            return f"[blob {digest} unreadable: {type(exc).__name__}]"
        text = data.decode("utf-8", errors="replace")
        if len(text) > self.max_chars:
            rest = len(text) - self.max_chars
            text = f"{text[: self.max_chars]}\n\n[... {rest} more characters in blob {digest}]"
        return text

    def messages(self, digest: str) -> str:
        raw = self.text(digest)
        try:
            messages = json.loads(raw)
            parts = [f"=== {role} ===\n{content}" for role, content in messages]
        except (ValueError, TypeError):
            return raw
        return "\n\n".join(parts)


class _JournalView:
    """The report's side of the one fold of the journal: each record, already folded into
    the run's state, also makes the per-call views and the timeline."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.calls: dict[str, CallView] = {}
        self.timeline: list[TimelineEvent] = []
        self.finished: RunFinished | None = None

    def event(self, t: str, kind: TimelineKind, text: str) -> None:
        self.timeline.append(TimelineEvent(t, seconds_between(self.origin, t), kind, text))

    def apply(self, record: LoopRecord, seq: int, t: str) -> None:
        if isinstance(record, CallPlanned):
            self.calls[record.call_id] = CallView(
                seq=seq,
                call_id=record.call_id,
                role=record.role,
                variant=record.variant,
                phase=record.phase,
                lineage=record.lineage,
                version=record.version,
                target=record.target,
                evaluation=record.evaluation,
                planned_t=t,
            )
            return
        call = self.calls.get(getattr(record, "call_id", ""))
        if call is not None:
            self._call_record(call, record, t)
        elif isinstance(record, SessionStarted):
            self.event(t, "session", f"session {record.session} started ({record.reason})")
        elif isinstance(record, SessionEnded):
            detail = f": {record.detail}" if record.detail else ""
            text = f"session {record.session} ended ({record.reason}){detail}"
            self.event(t, "session", text)
        elif isinstance(record, EndpointProbed):
            self.event(t, "endpoint", f"endpoint serves {record.served_model}")
            for note in record.notes:
                self.event(t, "endpoint", note)
        elif isinstance(record, Decision):
            template = _DECISION_TEXT.get(record.kind, record.kind)
            text = template.format(
                lineage=record.lineage, version=record.version, phase=record.phase
            )
            self.event(t, "decision", f"{text} ({record.reason})")
        elif isinstance(record, RunFinished):
            self.finished = record
            self.event(t, "finish", f"run finished: {record.outcome}")

    def _call_record(self, call: CallView, record: LoopRecord, t: str) -> None:
        if isinstance(record, ContextBuilt):
            call.messages_blob = record.messages.blob
        elif isinstance(record, LlmStarted):
            call.started_t = call.started_t or t
            call.attempts = max(call.attempts, record.attempt)
            call.status = "running"
        elif isinstance(record, LlmCompleted | LlmFailed):
            call.input_tokens += record.usage.input_tokens
            call.output_tokens += record.usage.output_tokens
            call.reasoning_tokens += record.usage.reasoning_tokens
            call.model_seconds += float(record.telemetry.get("total_s") or 0.0)
            if isinstance(record, LlmFailed):
                call.errors.append(
                    f"attempt {record.attempt}: {record.error_kind}: {record.message}"
                )
                text = f"{call.call_id} attempt {record.attempt} failed: {record.error_kind}"
                self.event(t, "failure", text)
            else:
                call.finish_reason = record.finish_reason
        elif isinstance(record, LlmAbandoned):
            call.errors.append(f"attempt {record.attempt} abandoned: {record.reason}")
        elif isinstance(record, CallCompleted):
            call.status = "completed"
            call.ended_t = t
            call.finish_reason = record.finish_reason
            call.truncated = record.truncated
            call.parsed_ok = record.parsed_ok
            call.text_blob = record.text.blob
            call.reasoning_blob = record.reasoning.blob if record.reasoning else None
            call.facts = record.facts
        elif isinstance(record, CallFailed | CallCancelled):
            call.status = "failed" if isinstance(record, CallFailed) else "cancelled"
            call.ended_t = t
            call.errors.append(record.message if isinstance(record, CallFailed) else record.reason)
            self.event(t, "failure", f"{call.call_id} {call.status}: {call.errors[-1]}")


def load_report(
    run_dir: Path, *, with_texts: bool = False, max_chars: int = DEFAULT_MAX_CHARS
) -> RunReport:
    """Read one run directory into a :class:`RunReport`. ``with_texts`` also reads every
    prompt, reasoning and response text (capped at ``max_chars`` each) for the HTML view.

    Raises NotARun (exit 6) for a directory that is not a run and CorruptionError (exit 65)
    when the journal is damaged other than by a torn last line."""
    reader = RunReader(run_dir)
    manifest = read_manifest(reader.manifest, run_dir)
    records = list(reader.records())
    created = manifest.created or (records[0].t if records else "")
    state = RunState(reviews=reviews_of(manifest.config.resolved))
    journal = _JournalView(records[0].t if records else created)
    for rec in records:
        typed = typed_record(rec)
        if typed is not None:
            state.apply(typed, rec.t)
            journal.apply(typed, rec.seq, rec.t)
    blobs = _Reader(reader, max_chars)
    result = _final_result(reader, journal.finished)
    run_state = run_condition(state, reader.lock_holder(), reader.last_writer())
    if run_state != "running":
        # No writer is alive: a call that did not end was cut off (killed or interrupted);
        # resume issues it again.
        for view in journal.calls.values():
            if view.ended_t is None:
                view.status = "unfinished"
    selected, proof_text = _selected(state, blobs)
    ordered = sorted(journal.calls.values(), key=lambda c: c.seq)
    return RunReport(
        run_dir=str(run_dir),
        run_id=manifest.run_id,
        created=str(created),
        state=run_state,
        phase=state.phase,
        # A grading-only run (a given proof, as calibration makes) solves nothing: its
        # outcome is that it was graded, not that the problem stayed unsolved.
        outcome="graded" if state.outcome and manifest.given_proof else state.outcome,
        reason=(result.reason if result is not None else "") or state.budget_exhausted,
        problem=_problem(manifest.problem.record),
        model=state.served_model or manifest.model.requested,
        endpoint=manifest.endpoint.url,
        evaluation_mode=manifest.evaluation,
        tools=tools_text(manifest.roles.role_tools, state.tool_calls),
        sessions=state.sessions,
        wall_s=wall_seconds(state),
        selected=selected,
        proof_text=proof_text,
        evaluation=_evaluation(ordered, result),
        in_loop_score=_in_loop_score(ordered, state),
        answer_check=result.answer_check if result is not None else None,
        lineages=_lineages(state, ordered),
        calls=tuple(ordered),
        timeline=tuple(sorted(journal.timeline, key=lambda e: e.t)),
        roles=_role_totals(ordered),
        tokens={
            "input": state.tokens_in,
            "output": state.tokens_out,
            "reasoning": state.tokens_reasoning,
            "total": state.tokens_total,
        },
        torn_tail=reader.torn_tail is not None,
        texts=_texts(state, ordered, blobs) if with_texts else {},
    )


def _selected(state: RunState, blobs: _Reader) -> tuple[SelectedView | None, str | None]:
    """The proof the run selected, and its text."""
    if state.selected is None:
        return None, None
    lineage, version = state.selected
    artifact = state.proof_text_artifact(lineage, version)
    status = state.lineages[lineage].versions[version].status
    selected: SelectedView = {
        "lineage": lineage,
        "version": version,
        "accepted": status == "accepted",
        "proof": artifact.blob if artifact else None,
        "reason": state.selection_reason,
    }
    return selected, blobs.text(artifact.blob) if artifact is not None else None


def _problem(record: Problem) -> ProblemView:
    return {
        "id": record.id,
        "title": record.title,
        "source": record.source,
        "statement": record.statement,
        "points": record.points,
        "digest": record.digest,
        "has_reference": bool(record.reference_solution),
        "has_guidelines": bool(record.grading_guidelines),
    }


def _texts(state: RunState, calls: list[CallView], blobs: _Reader) -> dict[str, str]:
    """Every prompt, response, reasoning and proof text the HTML view shows, by digest."""
    texts: dict[str, str] = {}
    for view in calls:
        if view.messages_blob and view.messages_blob not in texts:
            texts[view.messages_blob] = blobs.messages(view.messages_blob)
        for digest in (view.text_blob, view.reasoning_blob):
            if digest and digest not in texts:
                texts[digest] = blobs.text(digest)
    for ln in state.lineages.values():
        for ver in ln.versions.values():
            if ver.proof_artifact:
                digest = state.artifacts[ver.proof_artifact].blob
                texts.setdefault(digest, blobs.text(digest))
    return texts


def _final_result(reader: RunReader, finished: RunFinished | None) -> RunResult | None:
    """final/result.json, when the run.finished record names it and the bytes match."""
    link = finished.final.get("result.json") if finished is not None else None
    if link is None:
        return None
    try:
        return RunResult.model_validate_json(reader.read_blob(link.blob))
    except (StoreError, ValueError):
        return None


def _evaluation(calls: list[CallView], result: RunResult | None) -> EvaluationView | None:
    graders = [c for c in calls if c.phase == "evaluate" and c.role in _GRADER_ROLES]
    if not graders:
        return None
    reconcile = next((c for c in calls if c.role == "grader:reconcile"), None)
    rejudges = {c.target: c for c in calls if c.role == "grader:rejudge"}
    rejudged = [rejudges.get(c.call_id) for c in graders]
    score = result.evaluation_score if result is not None else None
    extra = (result.evaluation.model_extra or {}) if result and result.evaluation else {}
    how = extra.get("aggregation")
    if reconcile is not None and reconcile.status == "completed":
        note = f"; reconciled to {_score(reconcile)}"
    elif any(r is not None for r in rejudged):
        labels = ", ".join(_grade_label(r) if r is not None else "-" for r in rejudged)
        note = f"; re-judged: {labels}"
    else:
        note = ""
    if how:
        note += f"; {how} of the graders"
    return {
        "scores": [_score(c) if c.status == "completed" else None for c in graders],
        # For display: a grade, "ungraded" (completed, no readable grade) or "-" (not ended).
        "labels": [_grade_label(c) for c in graders],
        "rejudged": [None if r is None else _grade_label(r) for r in rejudged],
        "reconciled": (reconcile is not None and reconcile.status == "completed")
        or any(r is not None and r.status == "completed" for r in rejudged),
        "reconciled_score": _score(reconcile) if reconcile is not None else None,
        "note": note,
        "score": score,
        # The run finished and its final proof has no readable grade: scored 0, labelled.
        "ungraded": result is not None and score is None and result.selected is not None,
    }


def _score(call: CallView) -> int | None:
    return call.facts.score if isinstance(call.facts, GradeFacts) else None


_GRADER_ROLES = ("grader", "grader:evaluation")


def _grade_label(call: CallView) -> str:
    if call.status != "completed":
        return "-"
    score = _score(call)
    return "ungraded" if score is None else str(score)


def _in_loop_score(calls: list[CallView], state: RunState) -> int | None:
    if state.selected is None:
        return None
    lineage, version = state.selected
    for call in calls:
        if call.phase == "grade" and call.lineage == lineage and call.version == version:
            return _score(call)
    return None


def _lineages(state: RunState, calls: list[CallView]) -> tuple[LineageView, ...]:
    grades = {
        (c.lineage, c.version): _score(c)
        for c in calls
        if c.phase == "grade" and c.status == "completed"
    }
    views = []
    status: Literal["accepted", "abandoned", "open"]
    for ln in sorted(state.lineages.values(), key=lambda x: x.index):
        if ln.accepted_version is not None:
            status, detail = "accepted", f"accepted at v{ln.accepted_version}"
        elif ln.abandoned:
            status, detail = "abandoned", ln.abandon_reason
        elif ln.versions and all(v.producer == "input" for v in ln.versions.values()):
            # a grading-only run's given proof, or a proof it is compared with: no rounds
            status, detail = "open", "given to the run, not searched"
        else:
            status, detail = "open", f"{ln.consecutive_failures} failed round(s) in a row"
        versions = tuple(
            VersionView(
                version=v.version,
                parent=v.parent,
                producer=v.producer,
                status=v.status,
                proof_blob=state.artifacts[v.proof_artifact].blob if v.proof_artifact else None,
                grade=grades.get((ln.lineage, v.version)),
            )
            for v in sorted(ln.versions.values(), key=lambda x: x.version)
        )
        views.append(LineageView(ln.lineage, status, detail, versions))
    return tuple(views)


def _role_totals(calls: list[CallView]) -> tuple[RoleTotals, ...]:
    roles: dict[str, list[CallView]] = {}
    for call in calls:
        roles.setdefault(call.role, []).append(call)
    return tuple(
        RoleTotals(
            role=role,
            calls=len(group),
            input_tokens=sum(c.input_tokens for c in group),
            output_tokens=sum(c.output_tokens for c in group),
            reasoning_tokens=sum(c.reasoning_tokens for c in group),
            seconds=sum(c.seconds or 0.0 for c in group),
            median_output=_lower_median([c.output_tokens for c in group if c.ended_t]),
            max_output=max((c.output_tokens for c in group if c.ended_t), default=0),
            cut=sum(c.truncated for c in group),
        )
        for role, group in sorted(roles.items())
    )


def _lower_median(values: list[int]) -> int:
    """The lower median (an output some call really had), 0 for none."""
    return sorted(values)[(len(values) - 1) // 2] if values else 0


__all__ = [
    "DEFAULT_MAX_CHARS",
    "CallView",
    "LineageView",
    "RoleTotals",
    "RunReport",
    "TimelineEvent",
    "VersionView",
    "lineage_children",
    "load_report",
    "seconds_between",
]


def tools_text(role_tools: dict[str, list[str]], tool_calls: int) -> str:
    """ "none", or the tools each role was offered and how many tool calls were made."""
    if not role_tools:
        return "none"
    offered = "; ".join(f"{role}: {', '.join(names)}" for role, names in sorted(role_tools.items()))
    return f"{offered} ({tool_calls} tool calls made)"
