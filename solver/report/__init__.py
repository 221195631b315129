"""The face of solver.report: what other packages import from it."""

from __future__ import annotations

from solver.report.html import render_html
from solver.report.latex import tex_to_html
from solver.report.load import DEFAULT_MAX_CHARS, load_report
from solver.report.markdown import render_markdown
from solver.report.model import CallView
from solver.report.search import SearchView, VersionSearch, load_search, policy_of_run, search_view
from solver.report.tex_export import compile_pdf, find_engine, render_latex
from solver.report.timeline import OTHER_LANE, Bar, lanes, stack, timeline_svg, token_points

__all__ = [
    "DEFAULT_MAX_CHARS",
    "OTHER_LANE",
    "Bar",
    "CallView",
    "SearchView",
    "VersionSearch",
    "compile_pdf",
    "find_engine",
    "lanes",
    "load_report",
    "load_search",
    "policy_of_run",
    "render_html",
    "render_latex",
    "render_markdown",
    "search_view",
    "stack",
    "tex_to_html",
    "timeline_svg",
    "token_points",
]
