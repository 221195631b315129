"""A run report as Markdown: the summary a person reads first (`solver report RUN`)."""

from __future__ import annotations

from solver._util.terminal import visible
from solver.report.load import CallView, RunReport, lineage_children
from solver.report.search import SearchView


def inert(markdown: str) -> str:
    """The report as text no viewer executes: raw HTML (``<script>``, ``<img onerror>``) is
    escaped, since every CommonMark viewer passes it through, and control characters are
    shown rather than sent to the terminal that prints the report."""
    return visible(markdown).replace("<", "&lt;")


def format_seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 120:
        return f"{value:.1f} s"
    if value < 7200:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.2f} h"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def call_line(call: CallView) -> str:
    tokens = f"{call.input_tokens}+{call.output_tokens} tok"
    finish = call.finish_reason or "-"
    return (
        f"`{call.call_id}` {call.role} [{call.variant}]: {call.summary}; {tokens}, "
        f"{format_seconds(call.seconds)}, finish {finish}"
    )


def _version_lines(
    report: RunReport, lineage: str, version: int, depth: int, search: SearchView | None
) -> list[str]:
    view = next(
        v
        for ln in report.lineages
        if ln.lineage == lineage
        for v in ln.versions
        if v.version == version
    )
    pad = "  " * depth
    producer = report.call(view.producer)
    made_by = call_line(producer) if producer else f"`{view.producer}`"
    grade = f", in-loop grade {view.grade}/7" if view.grade is not None else ""
    entry = search.of(lineage, version) if search is not None else None
    searched = f"; {entry.summary()}" if entry is not None else ""
    lines = [f"{pad}- **v{version}** ({view.status}{grade}) from {made_by}{searched}"]
    for child in lineage_children(report, lineage, version):
        indent = "  " * (depth + 2) if child.role == "reviewer" else "  " * (depth + 1)
        lines.append(f"{indent}- {call_line(child)}")
    for ln in report.lineages:
        if ln.lineage == lineage:
            for later in ln.versions:
                if later.parent == version:
                    lines.extend(_version_lines(report, lineage, later.version, depth + 1, search))
    return lines


def lineage_markdown(report: RunReport, search: SearchView | None = None) -> list[str]:
    lines: list[str] = []
    for ln in report.lineages:
        best = search.best_of(ln.lineage) if search is not None else None
        shown = f"; best v{best.version}, verified {best.rate_text()}" if best else ""
        lines.append(f"- **{ln.lineage}**: {ln.status} ({ln.detail}{shown})")
        roots = [v for v in ln.versions if v.parent is None]
        for root in roots:
            lines.extend(_version_lines(report, ln.lineage, root.version, 1, search))
    return lines


def render_markdown(report: RunReport, search: SearchView | None = None) -> str:
    """``search``: what the policy did per version (``solver.report.search.load_search``)."""
    p = report.problem
    title = p.get("title") or p.get("id") or "problem"
    out: list[str] = [f"# Run report: {title}", ""]
    rows = [
        ("run", f"`{report.run_id}`"),
        ("directory", f"`{report.run_dir}`"),
        ("state", report.state),
        ("phase", report.phase),
        ("outcome", report.outcome or "(not finished)"),
        ("reason", report.reason or "-"),
        ("model", report.model or "-"),
        ("evaluation mode", "yes" if report.evaluation_mode else "no"),
        ("tools", report.tools),
        ("sessions", report.sessions),
        ("wall time", format_seconds(report.wall_s)),
        (
            "tokens",
            f"{report.tokens['total']} ({report.tokens['input']} in, "
            f"{report.tokens['output']} out, {report.tokens['reasoning']} reasoning)",
        ),
        ("calls", len(report.calls)),
    ]
    if search is not None:
        rows.append(("search", f"{search.settings_text()}; {search.cancelled} calls cancelled"))
    if report.in_loop_score is not None:
        rows.append(("in-loop grade", f"{report.in_loop_score}/7"))
    if report.evaluation is not None:
        ev = report.evaluation
        scores = ", ".join(ev["labels"])
        score = "ungraded (counted as 0)" if ev["ungraded"] else "(pending)"
        score = f"{ev['score']}/7" if ev["score"] is not None else score
        text = f"{score} (graders: {scores}"
        text += f"{ev['note']})"
        rows.append(("evaluation grade", text))
    if report.answer_check:
        rows.append(("answer check", report.answer_check.get("verdict", "-")))
    if report.torn_tail:
        rows.append(("journal", "ends in a torn line (a write was cut short); it is ignored"))
    out += ["| | |", "|---|---|", *[f"| {k} | {_cell(v)} |" for k, v in rows], ""]

    out += ["## Problem", "", p.get("statement", ""), ""]
    out += ["## Selected proof", ""]
    if report.selected is None:
        out += ["No proof has been selected yet.", ""]
    else:
        sel = report.selected
        state = "accepted" if sel["accepted"] else "not accepted"
        out += [f"Candidate {sel['lineage']} v{sel['version']} ({state}; {sel['reason']}).", ""]
        proof = report.proof_text or "(the proof text is unreadable)"
        # Quoted, so the proof's own headings stay inside this section.
        out += ["\n".join(f"> {line}".rstrip() for line in proof.splitlines()), ""]

    out += ["## Lineages", ""]
    out += lineage_markdown(report, search) or ["No candidate yet."]
    out += [""]

    other = [c for c in report.calls if c.lineage is None]
    if other:
        out += ["Other calls:", "", *[f"- {call_line(c)}" for c in other], ""]

    out += ["## Tokens and time per role", ""]
    out += [
        "| role | calls | input | output | reasoning | output a call: median, max | cut at limit "
        "| call time |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report.roles:
        out.append(
            f"| {r.role} | {r.calls} | {r.input_tokens} | {r.output_tokens} | "
            f"{r.reasoning_tokens} | {r.median_output}, {r.max_output} | {r.cut} | "
            f"{format_seconds(r.seconds)} |"
        )
    out += [""]

    out += ["## Timeline", ""]
    for e in report.timeline:
        out.append(f"- +{format_seconds(e.offset_s)} {e.text}")
    out += [""]

    out += ["## Calls", ""]
    out += [
        "| call | role | variant | result | finish | input | output | time |",
        "|---|---|---|---|---|---:|---:|---:|",
    ]
    for c in report.calls:
        out.append(
            f"| `{c.call_id}` | {c.role} | {c.variant} | {_cell(c.summary)} | "
            f"{c.finish_reason or '-'} | {c.input_tokens} | {c.output_tokens} | "
            f"{format_seconds(c.seconds)} |"
        )
    out += ["", "Prompts and responses of every call: `solver report RUN --html FILE`.", ""]
    return inert("\n".join(out))
