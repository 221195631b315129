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
from typing import Any

from solver.loop.state import RunState
from solver.report.model import (
    CallView,
    LineageView,
    RoleTotals,
    RunReport,
    TimelineEvent,
    VersionView,
    lineage_children,
    seconds_between,
)
from solver.run.manifest import read_manifest
from solver.run.session import fold
from solver.run.status import run_condition, wall_seconds
from solver.store import RunReader
from solver.store.errors import StoreError

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
    state = fold(iter(records))
    blobs = _Reader(reader, max_chars)
    calls: dict[str, CallView] = {}
    timeline: list[TimelineEvent] = []
    created = manifest.created or (records[0].t if records else "")
    origin = records[0].t if records else created
    finished: dict[str, Any] = {}

    def event(t: str, kind: str, text: str) -> None:
        timeline.append(TimelineEvent(t, seconds_between(origin, t), kind, text))

    for rec in records:
        data = rec.data
        call = calls.get(data.get("call_id", "")) if "call_id" in data else None
        if rec.type == "call.planned":
            calls[data["call_id"]] = CallView(
                seq=rec.seq,
                call_id=data["call_id"],
                role=data["role"],
                variant=data["variant"],
                phase=data["phase"],
                lineage=data.get("lineage"),
                version=data.get("version"),
                target=data.get("target"),
                evaluation=bool(data.get("evaluation")),
                planned_t=rec.t,
            )
        elif rec.type == "context.built" and call is not None:
            call.messages_blob = data["messages"]["blob"]
        elif rec.type == "llm.started" and call is not None:
            call.started_t = call.started_t or rec.t
            call.attempts = max(call.attempts, int(data["attempt"]))
            call.status = "running"
        elif rec.type in ("llm.completed", "llm.failed") and call is not None:
            usage = data.get("usage") or {}
            call.input_tokens += int(usage.get("input_tokens", 0))
            call.output_tokens += int(usage.get("output_tokens", 0))
            call.reasoning_tokens += int(usage.get("reasoning_tokens", 0))
            call.model_seconds += float((data.get("telemetry") or {}).get("total_s") or 0.0)
            if rec.type == "llm.failed":
                call.errors.append(
                    f"attempt {data['attempt']}: {data['error_kind']}: {data['message']}"
                )
                event(
                    rec.t,
                    "failure",
                    f"{call.call_id} attempt {data['attempt']} failed: {data['error_kind']}",
                )
            else:
                call.finish_reason = data.get("finish_reason")
        elif rec.type == "llm.abandoned" and call is not None:
            call.errors.append(f"attempt {data['attempt']} abandoned: {data['reason']}")
        elif rec.type == "call.completed" and call is not None:
            call.status = "completed"
            call.ended_t = rec.t
            call.finish_reason = data["finish_reason"]
            call.truncated = bool(data["truncated"])
            call.parsed_ok = bool(data["parsed_ok"])
            call.text_blob = data["text"]["blob"]
            call.reasoning_blob = (data.get("reasoning") or {}).get("blob")
            call.facts = dict(data.get("facts") or {})
        elif rec.type in ("call.failed", "call.cancelled") and call is not None:
            call.status = "failed" if rec.type == "call.failed" else "cancelled"
            call.ended_t = rec.t
            call.errors.append(data.get("message") or data.get("reason") or "")
            event(rec.t, "failure", f"{call.call_id} {call.status}: {call.errors[-1]}")
        elif rec.type == "session.started":
            event(rec.t, "session", f"session {data['session']} started ({data['reason']})")
        elif rec.type == "session.ended":
            detail = f": {data['detail']}" if data.get("detail") else ""
            event(rec.t, "session", f"session {data['session']} ended ({data['reason']}){detail}")
        elif rec.type == "endpoint.probed":
            event(rec.t, "endpoint", f"endpoint serves {data['served_model']}")
        elif rec.type == "decision":
            template = _DECISION_TEXT.get(data["kind"], data["kind"])
            text = template.format(**{k: data.get(k) for k in ("lineage", "version", "phase")})
            event(rec.t, "decision", f"{text} ({data['reason']})")
        elif rec.type == "run.finished":
            finished = data
            event(rec.t, "finish", f"run finished: {data['outcome']}")

    result = _final_result(reader, finished)
    run_state = run_condition(state, reader.lock_holder(), reader.last_writer())
    if run_state != "running":
        # No writer is alive: a call that did not end was cut off (killed or interrupted);
        # resume issues it again.
        for view in calls.values():
            if view.ended_t is None:
                view.status = "unfinished"
    wall_s = wall_seconds(state)

    proof_text = None
    selected = None
    if state.selected is not None:
        lineage, version = state.selected
        artifact = state.proof_text_artifact(lineage, version)
        status = state.lineages[lineage].versions[version].status
        selected = {
            "lineage": lineage,
            "version": version,
            "accepted": status == "accepted",
            "proof": artifact.blob if artifact else None,
            "reason": state.selection_reason,
        }
        if artifact is not None:
            proof_text = blobs.text(artifact.blob)

    record = manifest.problem.record
    problem = {
        "id": record.id,
        "title": record.title,
        "source": record.source,
        "statement": record.statement,
        "points": record.points,
        "digest": record.digest,
        "has_reference": bool(record.reference_solution),
        "has_guidelines": bool(record.grading_guidelines),
    }
    ordered = sorted(calls.values(), key=lambda c: c.seq)
    texts: dict[str, str] = {}
    if with_texts:
        for view in ordered:
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

    return RunReport(
        run_dir=str(run_dir),
        run_id=manifest.run_id,
        created=str(created),
        state=run_state,
        phase=state.phase,
        # A grading-only run (a given proof, as calibration makes) solves nothing: its
        # outcome is that it was graded, not that the problem stayed unsolved.
        outcome="graded" if state.outcome and manifest.given_proof else state.outcome,
        reason=str(result.get("reason") or state.budget_exhausted or ""),
        problem=problem,
        model=state.served_model or manifest.model.requested,
        endpoint=manifest.endpoint.url,
        evaluation_mode=manifest.evaluation,
        sessions=state.sessions,
        wall_s=wall_s,
        selected=selected,
        proof_text=proof_text,
        evaluation=_evaluation(ordered, result),
        in_loop_score=_in_loop_score(ordered, state),
        answer_check=result.get("answer_check"),
        lineages=_lineages(state, ordered),
        calls=tuple(ordered),
        timeline=tuple(sorted(timeline, key=lambda e: e.t)),
        roles=_role_totals(ordered),
        tokens={
            "input": state.tokens_in,
            "output": state.tokens_out,
            "reasoning": state.tokens_reasoning,
            "total": state.tokens_total,
        },
        torn_tail=reader.torn_tail is not None,
        texts=texts,
    )


def _final_result(reader: RunReader, finished: dict[str, Any]) -> dict[str, Any]:
    """final/result.json, when the run.finished record names it and the bytes match."""
    link = (finished.get("final") or {}).get("result.json")
    if not link:
        return {}
    try:
        loaded = json.loads(reader.read_blob(link["blob"]))
    except (StoreError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _evaluation(calls: list[CallView], result: dict[str, Any]) -> dict[str, Any] | None:
    graders = [c for c in calls if c.phase == "evaluate" and c.role != "grader:reconcile"]
    if not graders:
        return None
    reconcile = next((c for c in calls if c.role == "grader:reconcile"), None)
    score = result.get("evaluation_score")
    return {
        "scores": [c.facts.get("score") if c.status == "completed" else None for c in graders],
        # For display: a grade, "ungraded" (completed, no readable grade) or "-" (not ended).
        "labels": [_grade_label(c) for c in graders],
        "reconciled": reconcile is not None and reconcile.status == "completed",
        "reconciled_score": reconcile.facts.get("score") if reconcile is not None else None,
        "score": score,
        # The run finished and its final proof has no readable grade: scored 0, labelled.
        "ungraded": bool(result) and score is None and result.get("selected") is not None,
    }


def _grade_label(call: CallView) -> str:
    if call.status != "completed":
        return "-"
    score = call.facts.get("score")
    return "ungraded" if score is None else str(score)


def _in_loop_score(calls: list[CallView], state: RunState) -> int | None:
    if state.selected is None:
        return None
    lineage, version = state.selected
    for call in calls:
        if call.phase == "grade" and call.lineage == lineage and call.version == version:
            score = call.facts.get("score")
            return int(score) if isinstance(score, int) else None
    return None


def _lineages(state: RunState, calls: list[CallView]) -> tuple[LineageView, ...]:
    grades = {
        (c.lineage, c.version): c.facts.get("score")
        for c in calls
        if c.phase == "grade" and c.status == "completed"
    }
    views = []
    for ln in sorted(state.lineages.values(), key=lambda x: x.index):
        if ln.accepted_version is not None:
            status, detail = "accepted", f"accepted at v{ln.accepted_version}"
        elif ln.abandoned:
            status, detail = "abandoned", ln.abandon_reason
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
        )
        for role, group in sorted(roles.items())
    )


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
