"""Small display matters of `solver report` and `solver eval`: the timeline legend fits, the
calls table names its column right, and a grading-only run reads as graded."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from click.testing import CliRunner

from solver.cli.eval import eval_group
from solver.cli.report import report
from solver.report import load_report, render_html, render_markdown
from solver.testing import FakeEndpoint
from tests.report.responders import calibration_grader


def test_the_timeline_legend_fits_when_there_are_few_calls(finished_run: Path) -> None:
    loaded = load_report(finished_run)
    one_per_role = list({c.role: c for c in loaded.calls}.values())
    assert len(one_per_role) >= 4
    page = render_html(replace(loaded, calls=tuple(one_per_role)))
    svg = re.search(
        r'<svg [^>]*viewBox="0 0 \d+ (\d+)"[^>]*aria-label="timeline of the calls"', page
    )
    assert svg is not None
    legend_bottom = 20 + 14 * (len(one_per_role) - 1) + 10  # the last swatch's lower edge
    assert int(svg.group(1)) >= legend_bottom


def test_the_calls_table_names_the_result_column(finished_run: Path) -> None:
    markdown = render_markdown(load_report(finished_run))
    assert "| call | role | variant | result | finish |" in markdown
    assert "| status |" not in markdown


def test_a_grading_only_run_is_graded_not_unsolved(tmp_path: Path) -> None:
    file = tmp_path / "graded.jsonl"
    file.write_text(
        json.dumps({"id": "p1", "problem": "Show X.", "proof": "Gap. GRADE=5", "human_grade": 7})
        + "\n"
    )
    out = tmp_path / "cal"
    with FakeEndpoint(calibration_grader) as fake:
        args = ["calibrate", str(file), "--out", str(out), "--endpoint", fake.url + "/v1"]
        result = CliRunner().invoke(eval_group, [*args, "--graders", "1"])
    assert result.exit_code == 0, result.output
    assert "p1: graded, grade 5/7" in result.output
    shown = CliRunner().invoke(report, [str(out / "p1")])
    assert shown.exit_code == 0, shown.output
    assert "| outcome | graded |" in shown.output
    page = render_html(load_report(out / "p1"))
    assert '<span class="pill graded">graded</span>' in page and "pill unsolved" not in page
