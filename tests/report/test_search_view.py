"""What the policy did, in the report and the live view: each version's pass rate as the
policy counts it, its lineage's best version, the stage of verification, cancelled calls."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from solver.cli.progress import LiveProgress
from solver.cli.report import report
from solver.report import load_report, load_search, render_html, render_markdown
from solver.report.search import policy_of_run
from solver.run import read_manifest, read_state
from solver.store import RunReader
from tests.loop import scripts
from tests.loop.harness import ScriptedEndpoint, solve


def test_the_report_shows_each_versions_pass_rate_best_version_and_stage(
    finished_run: Path,
) -> None:
    search = load_search(finished_run)
    assert search is not None
    # The fixture's run: v0 of each lineage fails its 2 verifications, v1 passes both.
    first, revised = search.of("L0", 0), search.of("L0", 1)
    assert first is not None and revised is not None
    assert (first.passed, first.failed, first.pass_rate) == (0, 2, 0.0)
    assert (revised.passed, revised.failed, revised.pass_rate) == (2, 0, 1.0)
    assert revised.best and not first.best
    assert revised.stage == "all 2"  # K = 2 is not above the first stage: nothing staged
    out = render_markdown(load_report(finished_run), search)
    assert "| search | 2 verifications at once; 0 calls cancelled |" in out
    assert re.search(
        r"- \*\*L0\*\*: accepted \(accepted at v1; best v1, verified 2/2 \(100%\)\)", out
    )
    assert re.search(
        r"\*\*v0\*\* \(failed\) from `L0.v0.generate`.*; verified 0/2 \(0%\), stage all 2", out
    )
    html = render_html(load_report(finished_run), search)
    assert "verified 2/2 (100%), stage all 2, best" in html
    cli = CliRunner().invoke(report, [str(finished_run)])
    assert cli.exit_code == 0 and "best v1, verified 2/2 (100%)" in cli.output


def test_without_a_search_view_the_report_reads_as_before(finished_run: Path) -> None:
    out = render_markdown(load_report(finished_run))
    assert "| search |" not in out and "verified" not in out.split("## Tokens")[0]


def test_the_live_view_counts_as_the_run_policy_does(finished_run: Path) -> None:
    reader, state = read_state(finished_run)
    policy = policy_of_run(dict(read_manifest(reader.manifest, finished_run).config.resolved))
    screen = io.StringIO()
    console = Console(file=screen, width=120, force_terminal=False)
    with LiveProgress(
        state,
        {"wall_s": None, "tokens": None, "calls": None},
        lambda: 1.0,
        console=console,
        policy=policy,
    ) as live:
        live.refresh({"event": "tick"})
    lines = screen.getvalue().replace("┃", "│").splitlines()
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in lines]
    header = next(row for row in cells if "stage" in row)
    rows = {row[0]: row for row in cells if row[:1] in (["L0"], ["L1"])}
    assert rows["L0"][header.index("verified")] == "2/2 (100%)"
    assert rows["L0"][header.index("stage")] == "all 2"
    assert rows["L0"][header.index("best")] == "v1 2/2 (100%)"
    assert "cancelled 0" in screen.getvalue()
    assert RunReader(finished_run).manifest  # the view wrote nothing: the run reads as before


@pytest.mark.parametrize("checker", [False, True])
def test_an_accepted_proof_in_its_final_round_shows_that_round_as_its_stage(
    tmp_path: Path, checker: bool
) -> None:
    flags: dict[str, object] = {"acceptance.final_verifications": 3}
    if checker:
        flags["roles.checker.endpoint"] = "http://127.0.0.1:9/v1"
    with ScriptedEndpoint(scripts.solved) as fake:
        outcome = solve(fake, tmp_path, candidates=1, **flags)
    search = load_search(Path(outcome.run_dir))
    assert search is not None
    entry = search.of("L0", 0)
    assert entry is not None and entry.status == "accepted"
    assert (entry.passed, entry.failed) == (5, 0)  # the round's 2 and the final round's 3
    by = " by the checker" if checker else ""
    assert entry.stage == f"final round of 3{by}"
    out = render_markdown(load_report(Path(outcome.run_dir)), search)
    assert f"verified 5/5 (100%), stage final round of 3{by}, best" in out
