"""A run report as one self-contained HTML file: inline CSS and script, no network, no CDN.

Math is rendered by :mod:`solver.report.latex` when the file is written, so it reads well in any
browser offline; the TeX source is kept beside it. Prompts, reasoning and responses are stored
once each (by blob digest) in a JSON block and shown when a call's details are opened, so a
long run's file stays as small as its distinct texts.
"""

from __future__ import annotations

import html
import json

from solver.report.latex import tex_to_html
from solver.report.load import CallView, RunReport, lineage_children
from solver.report.markdown import format_seconds
from solver.report.search import SearchView
from solver.report.timeline import timeline_svg

ROLE_COLOURS = {
    "generator": "#3b7dd8",
    "verifier": "#d8903b",
    "verifier:check": "#b06a1c",
    "reviewer": "#8a5cc7",
    "reviser": "#2f9e6e",
    "grader": "#c94b4b",
    "grader:evaluation": "#a33a5a",
    "grader:reconcile": "#6b2d3f",
    "grader:rejudge": "#6b2d3f",
    "rubric_writer": "#8a6d1f",
    "selector": "#5a6b7d",
}

_CSS = """
body{font:15px/1.5 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2329;
background:#f6f7f9}
main{max-width:1180px;margin:0 auto;padding:20px 28px 60px}
h1{font-size:24px;margin:8px 0 4px}h2{font-size:19px;margin:28px 0 8px;border-bottom:1px solid
#d5dae0;padding-bottom:4px}
section{background:#fff;border:1px solid #e0e4e8;border-radius:8px;padding:12px 18px;
margin:14px 0}
table{border-collapse:collapse;font-size:13.5px}td,th{padding:3px 9px;border-bottom:1px solid
#eceff2;text-align:left;vertical-align:top}th{background:#f1f3f5}td.n{text-align:right;
font-variant-numeric:tabular-nums}
.pill{display:inline-block;padding:1px 9px;border-radius:10px;font-size:13px;color:#fff;
background:#5a6b7d}.pill.solved,.pill.accepted,.pill.finished,.pill.completed{background:#2f9e6e}
.pill.graded{background:#3b7dd8}
.pill.partial,.pill.open,.pill.running{background:#d8903b}.pill.unsolved,.pill.failed,
.pill.abandoned,.pill.crashed,.pill.unusable{background:#c94b4b}
.prose{white-space:pre-wrap;font-family:Georgia,'Times New Roman',serif;font-size:16px;
line-height:1.6;overflow-wrap:anywhere}
.prose .h{display:block;font-family:system-ui,sans-serif;font-weight:600;margin:8px 0 2px}
.math{font-family:'Cambria Math','STIX Two Math','Latin Modern Math',Georgia,serif;
font-style:italic;white-space:normal}
.math .fn,.math .text{font-style:normal}.math.display{display:block;text-align:center;
margin:6px 0}
.frac,.stack{display:inline-flex;flex-direction:column;vertical-align:middle;text-align:center;
font-size:88%;margin:0 2px}.frac>span:first-child{border-bottom:1px solid currentColor}
.radicand{border-top:1px solid currentColor}.overline{text-decoration:overline}
.underline{text-decoration:underline}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f4f5f7;border:1px solid #e3e6ea;
padding:8px 10px;border-radius:6px;font-size:12.5px;max-height:640px;overflow:auto}
details>summary{cursor:pointer}details.src>summary{font-size:12.5px;color:#5a6b7d}
ul.tree{list-style:none;margin:2px 0;padding-left:20px;border-left:1px dashed #c6ccd3}
ul.tree.top{border-left:none;padding-left:0}li.node{margin:3px 0}
.role{display:inline-block;min-width:74px;padding:0 6px;border-radius:4px;color:#fff;
font-size:12px;text-align:center;margin-right:6px}
.muted{color:#66707a;font-size:13px}code{font-size:12.5px}
.bar{height:9px;background:#3b7dd8;border-radius:2px;display:inline-block}
svg text{font:11px system-ui,sans-serif;fill:#333}
"""

_SCRIPT = """
const texts = JSON.parse(document.getElementById('texts').textContent);
for (const d of document.querySelectorAll('details[data-blob]')) {
  d.addEventListener('toggle', () => {
    const pre = d.querySelector('pre');
    if (d.open && !pre.dataset.filled) {
      pre.textContent = texts[d.dataset.blob] ?? '(text not included in this report)';
      pre.dataset.filled = '1';
    }
  });
}
"""


def _e(value: object) -> str:
    return html.escape(str(value))


def _pill(text: str) -> str:
    return f'<span class="pill {_e(text)}">{_e(text)}</span>'


def _colour(role: str) -> str:
    return ROLE_COLOURS.get(role, "#5a6b7d")


def _role(role: str) -> str:
    colour = _colour(role)
    return f'<span class="role" style="background:{colour}">{_e(role)}</span>'


def _prose(text: str, label: str) -> str:
    return (
        f'<div class="prose">{tex_to_html(text)}</div>'
        f'<details class="src"><summary>{_e(label)} source</summary><pre>{_e(text)}</pre>'
        "</details>"
    )


def _call_node(call: CallView) -> str:
    return (
        f'<li class="node lineage-node" data-call="{_e(call.call_id)}">{_role(call.role)}'
        f'<a href="#call-{_e(call.call_id)}"><code>{_e(call.call_id)}</code></a> '
        f"[{_e(call.variant)}] {_e(call.summary)} "
        f'<span class="muted">{call.tokens} tok, {format_seconds(call.seconds)}</span></li>'
    )


def _version_node(report: RunReport, lineage: str, version: int, search: SearchView | None) -> str:
    ln = next(x for x in report.lineages if x.lineage == lineage)
    view = next(v for v in ln.versions if v.version == version)
    producer = report.call(view.producer)
    made = (
        f'{_role(producer.role)}<a href="#call-{_e(producer.call_id)}"><code>'
        f"{_e(producer.call_id)}</code></a> {_e(producer.summary)}"
        if producer
        else f"<code>{_e(view.producer)}</code>"
    )
    grade = f" in-loop grade {view.grade}/7" if view.grade is not None else ""
    entry = search.of(lineage, version) if search is not None else None
    if entry is not None:
        grade += f' <span class="search">{_e(entry.summary())}</span>'
    proof = ""
    if view.proof_blob:
        proof = (
            f'<details data-blob="{_e(view.proof_blob)}"><summary>proof text</summary><pre></pre>'
            "</details>"
        )
    children = [_call_node(c) for c in lineage_children(report, lineage, version)]
    for later in ln.versions:
        if later.parent == version:
            children.append(_version_node(report, lineage, later.version, search))
    inner = f'<ul class="tree">{"".join(children)}</ul>' if children else ""
    return (
        f'<li class="node lineage-node version" data-lineage="{_e(lineage)}" '
        f'data-version="{version}"><b>v{version}</b> {_pill(view.status)}{grade} {made}'
        f"{proof}{inner}</li>"
    )


def _lineages(report: RunReport, search: SearchView | None) -> str:
    if not report.lineages:
        return "<p>No candidate yet.</p>"
    items = []
    for ln in report.lineages:
        roots = "".join(
            _version_node(report, ln.lineage, v.version, search)
            for v in ln.versions
            if v.parent is None
        )
        best = search.best_of(ln.lineage) if search is not None else None
        shown = f"; best v{best.version}, verified {best.rate_text()}" if best else ""
        items.append(
            f'<li class="node lineage" id="lineage-{_e(ln.lineage)}"><b>{_e(ln.lineage)}</b> '
            f'{_pill(ln.status)} <span class="muted">{_e(ln.detail + shown)}</span>'
            f'<ul class="tree">{roots}</ul></li>'
        )
    return f'<ul class="tree top">{"".join(items)}</ul>'


def _timeline_svg(report: RunReport) -> str:
    """One bar per call from its first request to its end, coloured by role; sessions and
    decisions as vertical marks."""
    spans = [c for c in report.calls if c.started_t is not None]
    if not spans or not report.timeline:
        return "<p>No call has started yet.</p>"
    from solver.report.load import seconds_between

    origin = report.timeline[0].t
    start = [seconds_between(origin, c.started_t or origin) for c in spans]
    last = max(e.offset_s for e in report.timeline)
    end = [
        seconds_between(origin, c.ended_t) if c.ended_t else max(last, s)
        for c, s in zip(spans, start, strict=True)
    ]
    total = max(max(end), last, 1e-3)
    width, left, row = 1100, 150, 7
    legend = sorted({c.role for c in spans})
    # Tall enough for the bars and for the legend beside them (one 14 px line per role).
    height = max(30 + row * len(spans), 30 + 14 * len(legend))
    scale = (width - left - 10) / total
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
        f'role="img" aria-label="timeline of the calls">'
    ]
    for e in report.timeline:
        if e.kind in ("session", "finish"):
            x = left + e.offset_s * scale
            parts.append(
                f'<line x1="{x:.1f}" y1="14" x2="{x:.1f}" y2="{height}" stroke="#999" '
                f'stroke-dasharray="3,3"><title>{_e(e.text)}</title></line>'
            )
    for i, (call, s, f) in enumerate(zip(spans, start, end, strict=True)):
        y = 20 + i * row
        colour = ROLE_COLOURS.get(call.role, "#5a6b7d")
        tip = f"{call.call_id} ({call.role}) {format_seconds(f - s)}: {call.summary}"
        parts.append(
            f'<rect x="{left + s * scale:.1f}" y="{y}" width="{max((f - s) * scale, 1.5):.1f}" '
            f'height="{row - 2}" fill="{colour}"><title>{_e(tip)}</title></rect>'
        )
    for quarter in range(5):  # a time axis: 0, 1/4, 1/2, 3/4 and the end
        x = left + quarter * total / 4 * scale
        parts.append(
            f'<line x1="{x:.1f}" y1="13" x2="{x:.1f}" y2="17" stroke="#666"/>'
            f'<text x="{x - (40 if quarter == 4 else 0):.1f}" y="11">'
            f"{_e(format_seconds(quarter * total / 4))}</text>"
        )
    for i, role in enumerate(legend):
        parts.append(
            f'<rect x="4" y="{20 + i * 14}" width="10" height="10" '
            f'fill="{ROLE_COLOURS.get(role, "#5a6b7d")}"/>'
            f'<text x="18" y="{29 + i * 14}">{_e(role)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _call_details(call: CallView) -> str:
    blobs = [
        ("prompt (messages)", call.messages_blob),
        ("reasoning", call.reasoning_blob),
        ("response", call.text_blob),
    ]
    shown = "".join(
        f'<details data-blob="{_e(digest)}"><summary>{label}</summary><pre></pre></details>'
        for label, digest in blobs
        if digest
    )
    facts = (
        f"<pre>{_e(json.dumps(call.facts_json(), indent=1, ensure_ascii=False))}</pre>"
        if call.facts_json()
        else ""
    )
    errors = "".join(f'<div class="muted">{_e(err)}</div>' for err in call.errors)
    where = f"{call.lineage} v{call.version}" if call.lineage is not None else "-"
    return (
        f'<details class="call" id="call-{_e(call.call_id)}"><summary>{_role(call.role)}'
        f"<code>{_e(call.call_id)}</code> [{_e(call.variant)}] {_e(call.summary)} "
        f'<span class="muted">{call.input_tokens}+{call.output_tokens} tok, '
        f"{format_seconds(call.seconds)}, finish {_e(call.finish_reason or '-')}</span></summary>"
        f'<div class="muted">phase {_e(call.phase)}; candidate {_e(where)}; status '
        f"{_e(call.status)}; attempts {call.attempts}; reasoning {call.reasoning_tokens} tok; "
        f"transport time {call.model_seconds:.2f} s; planned {_e(call.planned_t)}</div>"
        f"{errors}{facts}{shown}</details>"
    )


def _summary_table(report: RunReport, search: SearchView | None) -> str:
    rows: list[tuple[str, str]] = [
        ("state", _pill(report.state)),
        ("outcome", _pill(report.outcome) if report.outcome else "(not finished)"),
        ("reason", _e(report.reason or "-")),
        ("phase", _e(report.phase)),
        ("run", f"<code>{_e(report.run_id)}</code>"),
        ("model", _e(report.model or "-")),
        ("evaluation mode", "yes" if report.evaluation_mode else "no"),
        ("tools", _e(report.tools)),
        ("sessions", str(report.sessions)),
        ("wall time", _e(format_seconds(report.wall_s))),
        (
            "tokens",
            f"{report.tokens['total']} ({report.tokens['input']} in, "
            f"{report.tokens['output']} out, {report.tokens['reasoning']} reasoning)",
        ),
        ("calls", str(len(report.calls))),
    ]
    if search is not None:
        text = f"{search.settings_text()}; {search.cancelled} calls cancelled"
        rows.append(("search", _e(text)))
    if report.in_loop_score is not None:
        rows.append(("in-loop grade", f"{report.in_loop_score}/7"))
    if report.evaluation is not None:
        ev = report.evaluation
        scores = ", ".join(ev["labels"])
        value = "ungraded (counted as 0)" if ev["ungraded"] else "(pending)"
        value = f"{ev['score']}/7" if ev["score"] is not None else value
        rows.append(("evaluation grade", f"{_e(value)} (graders: {_e(scores)}{_e(ev['note'])})"))
    if report.answer_check:
        rows.append(("answer check", _e(report.answer_check.get("verdict", "-"))))
    if report.torn_tail:
        rows.append(("journal", "ends in a torn line (a write was cut short); ignored"))
    body = "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def _roles_table(report: RunReport) -> str:
    most = max((r.tokens for r in report.roles), default=0) or 1
    rows = "".join(
        f"<tr><td>{_role(r.role)}</td><td class=n>{r.calls}</td><td class=n>{r.input_tokens}</td>"
        f"<td class=n>{r.output_tokens}</td><td class=n>{r.reasoning_tokens}</td>"
        f"<td class=n>{r.median_output}, {r.max_output}</td><td class=n>{r.cut}</td>"
        f'<td class=n>{_e(format_seconds(r.seconds))}</td><td><span class=bar style="width:'
        f'{200 * r.tokens / most:.0f}px"></span></td></tr>'
        for r in report.roles
    )
    return (
        "<table><tr><th>role</th><th>calls</th><th>input</th><th>output</th><th>reasoning</th>"
        "<th>output a call: median, max</th><th>cut at limit</th>"
        f"<th>call time</th><th>tokens</th></tr>{rows}</table>"
    )


def render_html(report: RunReport, search: SearchView | None = None) -> str:
    """``search``: what the policy did per version (``solver.report.search.load_search``)."""
    p = report.problem
    title = p.get("title") or p.get("id") or "problem"
    if report.selected is None:
        proof = "<p>No proof has been selected yet.</p>"
    else:
        sel = report.selected
        state = "accepted" if sel["accepted"] else "not accepted"
        proof = (
            f'<p class="muted">Candidate <a href="#lineage-{_e(sel["lineage"])}">'
            f"{_e(sel['lineage'])}</a> v{sel['version']} ({state}; {_e(sel['reason'])})</p>"
            + _prose(report.proof_text or "(unreadable)", "LaTeX")
        )
    events = "".join(
        f"<tr><td class=n>+{_e(format_seconds(e.offset_s))}</td><td>{_e(e.kind)}</td>"
        f"<td>{_e(e.text)}</td></tr>"
        for e in report.timeline
    )
    others = [c for c in report.calls if c.lineage is None]
    other_list = (
        f'<p>Other calls:</p><ul class="tree top">{"".join(_call_node(c) for c in others)}</ul>'
        if others
        else ""
    )
    # "<" is escaped inside the JSON so no text can close the script element.
    texts = json.dumps(report.texts, ensure_ascii=False).replace("<", "\\u003c")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Run report: {_e(title)}</title><style>{_CSS}</style></head>
<body><main>
<h1>{_e(title)}</h1>
<p class="muted">run directory <code>{_e(report.run_dir)}</code>, created {_e(report.created)}</p>
<section id="summary">{_summary_table(report, search)}</section>
<h2>Problem</h2><section id="problem">{_prose(p.get("statement", ""), "LaTeX")}</section>
<h2>Selected proof</h2><section id="proof">{proof}</section>
<h2>Lineages</h2><section id="lineages">{_lineages(report, search)}{other_list}</section>
<h2>Tokens and time per role</h2><section id="roles">{_roles_table(report)}</section>
<h2>Timeline</h2><section id="timeline">{timeline_svg(report, _colour)}
<details><summary>every call on its own row</summary>{_timeline_svg(report)}</details>
<details><summary>events</summary><table>{events}</table></details></section>
<h2>Calls</h2><section id="calls">{"".join(_call_details(c) for c in report.calls)}</section>
</main>
<script type="application/json" id="texts">{texts}</script>
<script>{_SCRIPT}</script>
</body></html>
"""
