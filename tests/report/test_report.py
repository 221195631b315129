"""`solver report RUN`: Markdown, JSON and the self-contained HTML of real runs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from solver.cli.report import report
from solver.report import load_report, render_html, tex_to_html
from solver.store import RunStore
from solver.testing import FakeEndpoint, RecordedRequest
from solver.testing.fake_endpoint import Reply
from solver.testing.roles import role_of
from tests.report.conftest import cut_journal, solve
from tests.report.responders import GOOD_PROOF, olympiad


def journal(run_dir: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]


def test_markdown_shows_outcome_proof_lineages_roles_and_timeline(finished_run: Path) -> None:
    result = CliRunner().invoke(report, [str(finished_run)])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "| outcome | solved |" in out
    assert "> Let the odd integers be $2a+1$" in out  # the selected proof, quoted
    assert "- **L0**: accepted" in out and "- **L1**: accepted" in out
    # v0 fails its verifications (each with its review), v1 is the revision under it.
    assert re.search(r"- \*\*v0\*\* \(failed\) from `L0.v0.generate`", out)
    assert re.search(r"\n {6}- `L0.v0.verify.0.review` reviewer", out)
    assert re.search(r"\n {4}- \*\*v1\*\* \(accepted, in-loop grade 7/7\) from `L0.v1.revise`", out)
    assert "| verifier | 8 |" in out
    assert "run finished: solved" in out
    assert "evaluation grade | 7/7 (graders: 7, 7, 7; min of the graders)" in out


def test_json_agrees_with_the_journal_and_the_result(finished_run: Path) -> None:
    result = CliRunner().invoke(report, [str(finished_run), "--json"])
    assert result.exit_code == 0
    data = json.loads(result.output)
    planned = [r for r in journal(finished_run) if r["type"] == "call.planned"]
    assert [c["call_id"] for c in data["calls"]] == [r["data"]["call_id"] for r in planned]
    final = json.loads((finished_run / "final" / "result.json").read_text())
    assert data["tokens"]["total"] == final["tokens"]["total"]
    by_role = {r["role"]: r["tokens"] for r in data["roles"]}
    assert by_role == final["tokens"]["by_role"]
    assert {r["role"]: r["calls"] for r in data["roles"]} == final["calls"]["by_role"]
    assert (
        data["state"] == "finished" and data["selected"]["lineage"] == final["selected"]["lineage"]
    )
    assert all(c["status"] == "completed" and c["seconds"] is not None for c in data["calls"])


def test_unfinished_run_is_reported_from_its_journal_so_far(
    finished_run: Path, tmp_path: Path
) -> None:
    lines = journal(finished_run)
    # Cut right after the first accepted decision, mid-run, with a torn line after it.
    cut = (
        next(
            i
            for i, r in enumerate(lines)
            if r["type"] == "decision" and r["data"]["kind"] == "accepted"
        )
        + 3
    )
    run_dir = cut_journal(finished_run, tmp_path / "killed", cut, torn=b'{"data":{"call')
    result = CliRunner().invoke(report, [str(run_dir), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["state"] == "crashed" and data["outcome"] is None and data["torn_tail"]
    assert data["selected"] is None
    assert any(ln["status"] == "accepted" for ln in data["lineages"])
    assert len(data["calls"]) < len([r for r in lines if r["type"] == "call.planned"])
    markdown = CliRunner().invoke(report, [str(run_dir)]).output
    assert "No proof has been selected yet." in markdown
    assert "(not finished)" in markdown


def test_a_run_whose_writer_is_alive_is_running(finished_run: Path, tmp_path: Path) -> None:
    lines = journal(finished_run)
    cut = next(i for i, r in enumerate(lines) if r["type"] == "llm.started") + 1
    run_dir = cut_journal(finished_run, tmp_path / "live", cut)
    with RunStore.open(run_dir):  # holds the writer lock, as a live solve does
        live = load_report(run_dir)
    assert live.state == "running"
    first = live.calls[0]
    assert first.status == "running" and first.seconds is None
    assert load_report(run_dir).state == "crashed"
    assert load_report(run_dir).calls[0].status == "unfinished"


def test_report_errors_are_one_line_with_exit_codes(finished_run: Path, tmp_path: Path) -> None:
    missing = CliRunner().invoke(report, [str(tmp_path / "nope")])
    assert missing.exit_code == 6 and missing.output.count("\n") == 1
    (tmp_path / "empty").mkdir()
    empty = CliRunner().invoke(report, [str(tmp_path / "empty")])
    assert empty.exit_code == 6 and "MANIFEST.json" in empty.output
    damaged = tmp_path / "damaged"
    shutil.copytree(finished_run, damaged)
    text = (damaged / "journal.jsonl").read_text().splitlines(keepends=True)
    text[5] = text[5].replace('"data":{', '"data":{"edited":1,', 1)
    (damaged / "journal.jsonl").write_text("".join(text))
    broken = CliRunner().invoke(report, [str(damaged)])
    assert broken.exit_code == 65, broken.output
    assert broken.output.startswith("error:") and broken.output.count("\n") == 1


def test_html_is_self_contained_and_escapes_model_text(finished_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = CliRunner().invoke(report, [str(finished_run), "--html", str(out)])
    assert result.exit_code == 0
    page = out.read_text()
    # Nothing is fetched: no external scripts, styles, images or links.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "url(" not in page
    # Every distinct prompt and response is in the embedded store, once.
    texts = json.loads(
        re.search(
            r'<script type="application/json" id="texts">(.*?)</script>', page, re.DOTALL
        ).group(1)
    )
    loaded = load_report(finished_run, with_texts=True)
    for call in loaded.calls:
        assert call.messages_blob in texts and call.text_blob in texts
    assert page.count('<script type="application/json"') == 1
    hostile = replace(loaded, texts={"sha256:x": "</script><script>alert(1)</script>"})
    assert render_html(hostile).lower().count("</script>") == 2


def test_tex_rendering_is_readable_and_safe() -> None:
    rendered = tex_to_html(r"Let $\frac{a}{b} \le \sqrt{n}$ and $x_i^2 \in \mathbb{Z}$ <b>x</b>")
    assert '<span class="frac"><span>a</span><span>b</span></span> ≤ √' in rendered
    assert "x<sub>i</sub><sup>2</sup> ∈ ℤ" in rendered
    assert "&lt;b&gt;x&lt;/b&gt;" in rendered and "<b>x</b>" not in rendered
    assert tex_to_html(r"$\unknowncmd{y}$").count(r"\unknowncmd") == 1
    hostile = tex_to_html(r"$\text{</span><script>alert(1)</script>}$")
    assert "<script>" not in hostile
    # Markdown emphasis around math, rules, and display math on its own lines.
    prose = tex_to_html("**\\(k=0\\).** is *not* it\n\n---\nso\n\\[\nx \\\\[2mm] y\n\\]\nend")
    assert '<b><span class="math">k=0</span>.</b> is <i>not</i> it' in prose
    assert "<hr>" in prose
    assert 'so<span class="math display">x <br> y</span>end' in prose
    # Bare display environments, as in ProofBench's reference solutions, are math too.
    bare = tex_to_html(
        "gives\n\\begin{align*}\na_1 &= b \\\\\n&\\le c\n\\end{align*}\nand\n"
        "\\begin{equation}\nx^2 = 1 \\label{eq:1} \\tag{1.1}\n\\end{equation}\ndone"
    )
    assert (
        'gives<span class="math display">a<sub>1</sub> \u2003= b <br> \u2003≤ c</span>and' in bare
    )
    assert re.search(r'<span class="math display">x<sup>2</sup> = 1 +\(1\.1\)</span>done', bare)
    assert "\\begin" not in bare and "eq:1" not in bare


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(chromium() is None, reason="needs Debian's chromium package")
def test_html_in_headless_chromium_shows_proof_and_lineage(
    finished_run: Path, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    subprocess.run(  # through the installed command line, as a person would
        [sys.executable, "-m", "solver.cli.main", "report", str(finished_run), "--html", str(page)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    flags = [
        chromium() or "chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1280,2000",
    ]
    shot = tmp_path / "shot.png"
    subprocess.run(
        [*flags, f"--screenshot={shot}", page.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    dom = subprocess.run(
        [*flags, "--dump-dom", page.as_uri()],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    proof = dom[dom.index('id="proof"') : dom.index('id="lineages"')]
    assert "Let the odd integers be" in proof and "≡ 2" in proof
    assert GOOD_PROOF.split("$")[0].strip() in proof
    nodes = re.findall(r'data-lineage="(L\d)" data-version="(\d)"', dom)
    assert sorted(set(nodes)) == [("L0", "0"), ("L0", "1"), ("L1", "0"), ("L1", "1")]
    assert dom.count('class="node lineage-node"') >= 16  # every verify, review and grade call


def test_the_roles_table_gives_each_roles_output_spread_and_calls_cut_at_their_limit(
    tmp_path: Path,
) -> None:
    """Per role: the lower median and the largest output of a call, and how many calls were
    cut at their token limit, as the journal's completed calls have them (what a role's
    thinking budget is chosen from)."""

    def cut_grades(request: RecordedRequest) -> Reply:
        reply = olympiad(request)
        if role_of(request) == "grader":  # the in-loop grades run out of tokens
            return replace(reply, finish_reason="length")
        return reply

    with FakeEndpoint(cut_grades) as endpoint:
        run_dir = tmp_path / "cut"
        solve(endpoint, run_dir)
    outputs: dict[str, list[int]] = {}
    cut: dict[str, int] = {}
    for record in journal(run_dir):
        if record["type"] == "call.completed":
            data = record["data"]
            assert isinstance(data, dict)
            outputs.setdefault(data["role"], []).append(data["usage"]["output_tokens"])
            cut[data["role"]] = cut.get(data["role"], 0) + bool(data["truncated"])
    result = CliRunner().invoke(report, [str(run_dir), "--json"])
    roles = {r["role"]: r for r in json.loads(result.output)["roles"]}
    assert cut.get("grader", 0) >= 1 and cut.get("verifier", 0) == 0
    for role, spent in outputs.items():
        ordered = sorted(spent)
        assert roles[role]["median_output"] == ordered[(len(ordered) - 1) // 2]
        assert roles[role]["max_output"] == ordered[-1]
        assert roles[role]["cut"] == cut[role]
    markdown = CliRunner().invoke(report, [str(run_dir)]).output
    grader = roles["grader"]
    assert f"| {grader['median_output']}, {grader['max_output']} | {grader['cut']} |" in markdown
