"""`solver eval calibrate FILE` and the agreement figures behind it."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from solver.cli.eval import eval_group
from solver.cli.main import main
from solver.evaluation import (
    agreement,
    calibration_figures,
    load_graded,
    pearson,
    ranks,
    verification_lines,
)
from solver.testing import FakeEndpoint, RecordedRequest
from solver.testing.fake_endpoint import Reply
from tests.loop.harness import audit_ok
from tests.loop.scripts import role_of
from tests.report.responders import (
    calibrate_with_variants,
    calibration_grader,
    judging_reviewer,
    judging_selector,
    kill_eval_when,
    pair_grader,
    variant_verifier,
    write_graded,
)

DATA = Path(__file__).parent / "data"

# (item, human, model): diffs 0, -1, 0, -2, 0, +3
FIXTURE = [("a", 7, 7), ("b", 7, 6), ("c", 0, 0), ("d", 3, 1), ("e", 5, 5), ("f", 1, 4)]


def test_agreement_figures_on_a_fixture_with_known_answers() -> None:
    result = agreement(FIXTURE)
    assert result.n == 6
    assert result.exact == pytest.approx(3 / 6)
    assert result.within_one == pytest.approx(4 / 6)
    assert result.mean_abs_error == pytest.approx(6 / 6)
    assert result.bias == pytest.approx(0 / 6)
    humans = [h for _, h, _ in FIXTURE]
    models = [m for _, _, m in FIXTURE]
    assert result.pearson == pytest.approx(np.corrcoef(humans, models)[0, 1])
    # Spearman = Pearson of the ranks; ties share their mean rank.
    assert ranks(humans) == [5.5, 5.5, 1.0, 3.0, 4.0, 2.0]
    assert ranks(models) == [6.0, 5.0, 1.0, 2.0, 4.0, 3.0]
    assert result.spearman == pytest.approx(np.corrcoef(ranks(humans), ranks(models))[0, 1])
    assert [(d.item, d.human, d.model) for d in result.disagreements] == [
        ("b", 7, 6),
        ("d", 3, 1),
        ("f", 1, 4),
    ]


def test_correlation_is_exact_at_the_edges_and_undefined_without_variance() -> None:
    assert pearson([0, 1, 2], [1, 3, 5]) == pytest.approx(1.0)
    assert pearson([0, 1, 2], [5, 3, 1]) == pytest.approx(-1.0)
    assert pearson([7, 7, 7], [7, 6, 5]) is None
    constant = agreement([("x", 7, 7), ("y", 7, 7)])
    assert constant.exact == 1 and constant.pearson is None and not constant.disagreements
    with pytest.raises(ValueError):
        agreement([])


def test_reads_deepseekmath_v2_outputs() -> None:
    items = load_graded(DATA / "dsm-v2-imo2025-sample.jsonl")
    assert [(i.item, i.human) for i in items] == [("IMO2025-1", 7), ("IMO2025-6", 0)]
    assert items[0].problem.statement.startswith("A line in the plane is called")
    assert items[0].proof.startswith("**Notation.**")


def test_calibrate_grades_given_proofs_and_reports_agreement(tmp_path: Path) -> None:
    file = tmp_path / "graded.jsonl"
    rows = [
        {"id": "p1", "problem": "Show X.", "proof": "Complete. GRADE=7", "human_grade": 7},
        {"id": "p2", "problem": "Show Y.", "proof": "Gap. GRADE=5", "human_grade": 7},
        {"id": "p3", "problem": "Show Z.", "proof": "Wrong. GRADE=0", "human_grade": 0},
        {
            "id": "p4",
            "problem": "Show W.",
            "proof": "Part. GRADE=3",
            "human_grade": 2,
            "reference_solution": "W holds.",
        },
    ]
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "cal"
    with FakeEndpoint(calibration_grader) as fake:
        args = ["calibrate", str(file), "--out", str(out), "--endpoint", fake.url + "/v1"]
        result = CliRunner().invoke(eval_group, [*args, "--graders", "2"])
        again = CliRunner().invoke(eval_group, [*args, "--graders", "2"])
        requests = len(fake.requests)
    assert result.exit_code == 0, result.output
    assert again.exit_code == 0 and again.output.count("already finished") == 4
    # 4 proofs x 2 graders, and p4's marking scheme (a reference solution, no guidelines);
    # the second invocation made no call.
    assert requests == 9
    data = json.loads((out / "calibration.json").read_text())
    assert [row["model"] for row in data["items"]] == [7, 5, 0, 3]
    figures = data["agreement"]
    assert figures["exact"] == 0.5 and figures["within_one"] == 0.75
    assert figures["pearson"] == pytest.approx(
        np.corrcoef([7, 7, 0, 2], [7, 5, 0, 3])[0, 1], abs=1e-4
    )
    assert [d["item"] for d in figures["disagreements"]] == ["p2", "p4"]
    markdown = (out / "calibration.md").read_text()
    assert "- p2: human 7, model 5 (-2)" in markdown
    assert "exact agreement: 50.0% (2/4)" in markdown


def test_calibrate_bad_file_is_one_line_exit_2(tmp_path: Path) -> None:
    file = tmp_path / "graded.jsonl"
    file.write_text('{"problem": "P", "proof": "x", "human_grade": 7}\nnot json\n')
    result = CliRunner().invoke(eval_group, ["calibrate", str(file), "--out", str(tmp_path)])
    assert result.exit_code == 2 and "line 2: not JSON" in result.output
    assert result.output.count("\n") == 1
    file.write_text('{"problem": "P", "proof": "x", "human_grade": 9}\n')
    result = CliRunner().invoke(eval_group, ["calibrate", str(file), "--out", str(tmp_path)])
    assert result.exit_code == 2 and "not within 0-7" in result.output


def test_calibrate_reports_agreement_per_aggregation_from_recorded_grades(
    tmp_path: Path,
) -> None:
    file = tmp_path / "graded.jsonl"
    # Two graders a line; no pair spreads more than 2, so none is re-judged.
    rows = [
        ("p1", "GRADES=76", 7),
        ("p2", "GRADES=57", 7),
        ("p3", "GRADES=01", 0),
        ("p4", "GRADES=32", 2),
    ]
    write_graded(file, rows)
    out = tmp_path / "cal"
    with FakeEndpoint(pair_grader()) as fake:
        args = ["calibrate", str(file), "--out", str(out), "--endpoint", fake.url + "/v1"]
        result = CliRunner().invoke(eval_group, [*args, "--graders", "2", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "calibration.json").read_text())
    assert [sorted(row["final_grades"]) for row in data["items"]] == [
        [6, 7],
        [5, 7],
        [0, 1],
        [2, 3],
    ]
    # The reported grade is the default aggregation's: the minimum.
    assert [row["model"] for row in data["items"]] == [6, 5, 0, 2]
    by_how = data["by_aggregation"]
    assert by_how["min"] == data["agreement"]
    assert (by_how["min"]["exact"], by_how["min"]["within_one"]) == (0.5, 0.75)
    assert by_how["median"]["exact"] == 0.5  # the lower median of two is the minimum
    assert (by_how["mean"]["exact"], by_how["mean"]["within_one"]) == (0.0, 1.0)
    assert by_how["mean"]["bias"] == pytest.approx((-0.5 - 1 + 0.5 + 0.5) / 4)
    markdown = (out / "calibration.md").read_text()
    assert "## Agreement per aggregation" in markdown
    assert "| mean | 4 | 0.0% | 100.0% |" in markdown


def test_calibrate_measures_each_verifier_variant_on_proofs_humans_graded(tmp_path: Path) -> None:
    rows = [
        ("p1", "Complete. GRADE=7", 7),
        ("p2", "FLAW here. GRADE=0", 0),
        ("p3", "SUBTLE gap. GRADE=2", 2),
        ("p4", "DEEP gap. GRADE=1", 1),
    ]
    out, verifier_calls = calibrate_with_variants(tmp_path, rows)
    assert verifier_calls == 4 * 3 * 2  # every proof, every variant, twice
    data = json.loads((out / "calibration.json").read_text())
    assert data["items"][1]["verifications"]["adversarial"] == ["fail", "fail"]
    figures = data["verifiers"]
    assert figures["per_variant"] == 2 and figures["flawed_proofs"] == 3
    by_variant = figures["variants"]
    # flawed: p2 (all but structure-first see it), p3 (adversarial alone), p4 (none)
    assert by_variant["stepwise"]["fails_on_flawed"] == pytest.approx(2 / 6)
    assert by_variant["stepwise"]["blind"] == pytest.approx(2 / 3)
    assert by_variant["adversarial"]["blind"] == pytest.approx(1 / 3)
    assert by_variant["structure-first"]["blind"] == 1.0
    assert all(v["fails_on_correct"] == 0.0 for v in by_variant.values())
    assert figures["hidden_from_all"] == pytest.approx(1 / 3)  # p4
    # blind indicators over p2, p3, p4: stepwise 0,1,1; adversarial 0,0,1; structure 1,1,1
    pairs = figures["blind_correlation"]
    assert pairs["stepwise|adversarial"] == pytest.approx(0.5)
    assert pairs["stepwise|structure-first"] is None  # structure-first is blind to all
    assert figures["mean_blind_correlation"] == pytest.approx(0.5)
    markdown = (out / "calibration.md").read_text()
    assert "## Verifier variants" in markdown
    assert "| adversarial | 6 | 66.7% | 33.3% | 0.0% |" in markdown
    assert "hidden from every variant: 33.3% (1/3)" in markdown
    for row in data["items"]:  # the verifications are audited like any other call
        audit_ok(Path(row["run_dir"]))
    # the directory holds verifications of 2 a variant: another count is refused
    args = ["calibrate", str(tmp_path / "graded.jsonl"), "--out", str(out)]
    with FakeEndpoint(variant_verifier) as fake:  # passes the check before the runs
        args += ["--endpoint", fake.url + "/v1"]
        refused = CliRunner().invoke(eval_group, [*args, "--graders", "1", "--verifications", "3"])
        assert not fake.requests  # refused before any call
    assert refused.exit_code == 2 and "given_verifications was 2, now 3" in refused.output


def test_calibrate_reviews_the_verifications_and_measures_the_reviewer(tmp_path: Path) -> None:
    rows = [
        ("p1", "Complete ODD. GRADE=7", 7),  # structure-first's false alarm, rejected
        ("p2", "Complete ODD KEEP. GRADE=7", 7),  # the same false alarm, confirmed
        ("p3", "FLAW here. GRADE=0", 0),  # stepwise and adversarial fail it, confirmed
        ("p4", "SUBTLE gap ODD. GRADE=2", 2),  # adversarial and structure-first, rejected
    ]
    out, _ = calibrate_with_variants(tmp_path, rows, judging_reviewer)
    data = json.loads((out / "calibration.json").read_text())
    reviews = {row["item"]: row["reviews"] for row in data["items"]}
    assert reviews["p1"] == {"findings": 2, "upheld": 0, "overturned": 2, "unread": 0}
    assert reviews["p2"] == {"findings": 2, "upheld": 2, "overturned": 0, "unread": 0}
    assert reviews["p3"]["upheld"] == 4 and reviews["p4"]["overturned"] == 4
    figures = data["reviewers"]
    assert figures["on_correct"]["verdicts"] == 12 and figures["on_flawed"]["findings"] == 8
    assert figures["reject_false"] == pytest.approx(0.5)  # 2 of the 4 false findings
    assert figures["upheld_on_flawed"] == pytest.approx(0.5)
    # 4 findings in 12 verdicts on proofs graded 7: 4 of the flawed proofs' 8 taken as false
    assert figures["false_share_on_flawed"] == pytest.approx(0.5)
    # upheld 0.5 = confirm x 0.5 + (1 - 0.5) x 0.5, so confirm = 0.5
    assert figures["confirm_real"] == pytest.approx(0.5)
    markdown = (out / "calibration.md").read_text()
    assert "| graded 7 | 12 | 4 | 2 | 2 | 0 |" in markdown
    assert "real findings confirmed (what is upheld beyond the false ones): 50.0%" in markdown
    # the command's last lines say the same
    assert verification_lines(calibration_figures(data["items"], 2)) == [
        "verifiers: 4 fails in 12 verdicts on proofs graded 7; "
        "0 of 2 flawed proofs hidden from every variant",
        "reviewer: overturned 50.0% of the false findings, confirmed 50.0% of the real ones",
    ]
    assert verification_lines(calibration_figures(data["items"], 0)) == []
    for row in data["items"]:  # the reviews are audited like any other call
        audit_ok(Path(row["run_dir"]))


COMPARED = [
    ("q-a", "Complete. GRADE=7", 7),
    ("q-b", "A gap. GRADE=2", 2),
    ("q-c", "Complete too. GRADE=7", 7),
    ("r", "Alone. GRADE=5", 5),  # another problem: compared with nothing
]


def _compare(tmp_path: Path, responder: Any) -> tuple[dict[str, Any], str, list[str]]:
    file = tmp_path / "graded.jsonl"
    write_graded(file, COMPARED, problems={"q-a": "Show q.", "q-b": "Show q.", "q-c": "Show q."})
    out = tmp_path / "cal"
    with FakeEndpoint(responder) as fake:
        args = ["calibrate", str(file), "--out", str(out), "--endpoint", fake.url + "/v1"]
        result = CliRunner().invoke(eval_group, [*args, "--graders", "1", "--comparisons"])
        selector_calls = [r.user_text for r in fake.requests if role_of(r) == "selector"]
    assert result.exit_code == 0, result.output
    return json.loads((out / "calibration.json").read_text()), result.output, selector_calls


def test_calibrate_compares_proofs_humans_graded_differently_both_ways(tmp_path: Path) -> None:
    data, output, calls = _compare(tmp_path, judging_selector)
    # q-a with q-b, and q-b with q-c (q-a and q-c are both 7s), each both ways
    assert len(calls) == 4
    rows = {row["item"]: row for row in data["items"]}
    assert [c["rival"] for c in rows["q-a"]["comparisons"]] == ["q-b"]
    assert rows["q-a"]["comparisons"][0]["choices"] == {"ab": "given", "ba": "given"}
    assert rows["q-b"]["comparisons"][0]["choices"] == {"ab": "rival", "ba": "rival"}
    assert rows["q-c"]["comparisons"] == [] and rows["r"]["comparisons"] == []
    figures = data["selectors"]
    assert figures["comparisons"] == 2 and figures["choices"] == 4
    assert figures["higher_share"] == 1.0 and figures["chose_first"] == 2
    assert figures["orders_agree"] == 2
    assert "selector: chose the proof humans graded higher in 4 of 4 choices (100.0%)" in output
    assert "; 2 pair(s) to compare, 4 selector calls" in output
    markdown = (tmp_path / "cal" / "calibration.md").read_text()
    assert "- chose the proof shown first: 50.0% (2/4)" in markdown
    for row in data["items"]:  # the comparisons are audited like any other call
        audit_ok(Path(row["run_dir"]))
        # its grade is the evaluation's: the reason claims no missing grade
        result = json.loads((Path(row["run_dir"]) / "final" / "result.json").read_text())
        assert result["reason"] == "given proof"
    report = CliRunner().invoke(main, ["report", str(tmp_path / "cal" / "q-a")])
    assert report.exit_code == 0, report.output
    assert "**rival0**: open (given to the run, not searched)" in report.output
    assert "`given.rival0.ab` selector [pairwise]: chose given v0" in report.output


def test_a_selector_that_always_chooses_proof_a_is_seen_for_what_it_is(tmp_path: Path) -> None:
    data, _, _ = _compare(tmp_path, calibration_grader)  # its selector answers "A" each time
    figures = data["selectors"]
    assert figures["higher_share"] == 0.5 and figures["chose_first"] == 4
    assert figures["orders_agree"] == 0 and figures["both_orders"] == 2


def test_a_calibration_killed_mid_comparison_resumes_without_repeating_it(
    tmp_path: Path,
) -> None:
    file = tmp_path / "graded.jsonl"
    write_graded(file, COMPARED, problems={"q-a": "Show q.", "q-b": "Show q.", "q-c": "Show q."})
    out = tmp_path / "cal"
    released = threading.Event()

    def held(request: RecordedRequest) -> Reply:
        if role_of(request) == "selector":
            released.wait(60)  # the first process is killed while its selectors wait here
        return judging_selector(request)

    with FakeEndpoint(held) as fake:
        args = ["calibrate", str(file), "--out", str(out), "--endpoint", fake.url + "/v1"]
        args += ["--graders", "1", "--comparisons"]
        journal = out / "q-a" / "journal.jsonl"

        def comparing() -> bool:
            return journal.is_file() and b'"given.rival0.ab"' in journal.read_bytes()

        try:
            kill_eval_when(args, comparing, "comparison started")
        finally:
            released.set()
        result = CliRunner().invoke(eval_group, args)
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in journal.read_bytes().splitlines()]
    completed = [r["data"]["call_id"] for r in records if r["type"] == "call.completed"]
    assert sorted(c for c in completed if ".rival" in c) == ["given.rival0.ab", "given.rival0.ba"]
    rivals = [
        r for r in records if r["type"] == "artifact.put" and r["data"]["lineage"] == "rival0"
    ]
    assert len(rivals) == 1  # the rival proof is recorded once, not again on resume
    data = json.loads((out / "calibration.json").read_text())
    assert data["selectors"]["choices"] == 4 and data["selectors"]["higher_share"] == 1.0
    audit_ok(out / "q-a")


def test_calibrate_without_verifications_asks_for_none(tmp_path: Path) -> None:
    file = tmp_path / "graded.jsonl"
    file.write_text(json.dumps({"id": "p", "problem": "P.", "proof": "GRADE=7", "human_grade": 7}))
    out = tmp_path / "cal"
    with FakeEndpoint(variant_verifier) as fake:
        args = ["calibrate", str(file), "--out", str(out), "--endpoint", fake.url + "/v1"]
        result = CliRunner().invoke(eval_group, [*args, "--graders", "1"])
        assert not any(role_of(r) == "verifier" for r in fake.requests)
    assert result.exit_code == 0, result.output
    data = json.loads((out / "calibration.json").read_text())
    assert (
        data["verifiers"] is None
        and "## Verifier variants" not in (out / "calibration.md").read_text()
    )
