"""``bench/policy.py --calibration FILE`` and ``--serve-bench FILE``: the lab's verifier
parameters taken from what ``solver eval calibrate --verifications N`` measured on human-graded
proofs, and its GPU fitted to what ``solver serve bench`` measured, so measurements on the
target model run the policies at the measured values."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from solver.cli.eval import eval_group
from solver.serve.bench import BenchOptions, LevelResult, summary_json
from solver.testing import FakeEndpoint, GpuModel, RoleParams
from tests.report.responders import (
    calibrate_with_variants,
    calibration_grader,
    judging_reviewer,
    write_graded,
)

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import calibrated  # noqa: E402  (bench/calibrated.py)
import policy  # noqa: E402  (bench/policy.py)


def _calibration(tmp_path: Path) -> Path:
    """A real calibration: four proofs, two graded 7 (one the structure-first variant fails
    for no reason), two flawed, verified twice by each of the three variants."""
    rows = [
        ("p1", "Complete. GRADE=7", 7),
        ("p2", "Complete but ODD. GRADE=7", 7),
        ("p3", "FLAW here. GRADE=0", 0),
        ("p4", "SUBTLE gap. GRADE=2", 2),
    ]
    out, _ = calibrate_with_variants(tmp_path, rows)
    return out / "calibration.json"


def test_a_calibration_sets_the_lab_verifier_parameters_it_measured(tmp_path: Path) -> None:
    path = _calibration(tmp_path)
    moves, lines = calibrated.lab_moves(path)
    found = dict(moves)
    # 12 verdicts on the two correct proofs; structure-first failed p2 twice
    assert found["false_alarm"] == pytest.approx(2 / 12)
    assert found["no_verdict"] == 0.0
    # blind on p3, p4: stepwise 0,1; adversarial 0,0 (no variance); structure-first 1,1 (none)
    # so no pair is defined and the centre stays
    assert "variant_correlation" not in found
    text = "\n".join(lines)
    assert "false_alarm = 0.167 [" in text and "2 fails in 12 verdicts on 2 proofs" in text
    assert "variant_correlation: not measured" in text
    assert "hidden from every variant = 0.000" in text and "(reported, not applied)" in text


def test_the_measured_correlation_is_applied_within_the_labs_range() -> None:
    variant = {
        "verifications_of_correct": 10,
        "fails_on_correct": 0.1,
        "verifications_of_flawed": 6,
        "no_verdict": 1,
    }
    figures = {
        "variants": {"stepwise": variant, "adversarial": variant},
        "correct_proofs": 5,
        "flawed_proofs": 3,
        "blind_correlation": {"stepwise|adversarial": -0.4},
        "mean_blind_correlation": -0.4,
        "hidden_count": [1, 3],
    }
    found = {m.name: m for m in calibrated.measured(figures)}
    assert found["variant_correlation"].value == 0.0  # a negative correlation is held at 0
    assert found["false_alarm"].value == pytest.approx(0.1)
    assert found["no_verdict"].value == pytest.approx(2 / 34)
    assert found["hidden from every variant"].applied is False
    low, high = calibrated.wilson(0, 20)
    assert low == 0.0 and high == pytest.approx(0.161, abs=1e-3)  # not the empty [0, 0]


def test_the_lab_runs_at_the_calibrated_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _calibration(tmp_path)
    ran_with: list[RoleParams] = []
    run_all = policy.run_all

    def recorded(*args: Any, **kwargs: Any) -> Any:
        ran_with.append(args[3])  # the lab's role parameters
        return run_all(*args, **kwargs)

    monkeypatch.setattr(policy, "run_all", recorded)
    argv = ["--calibration", str(path), "--sessions", "1", "--problems", "P1"]
    # --lab applies after the calibration
    code = policy.main(
        [*argv, "--policies", "default", "--audit-every", "0", "--lab", "no_verdict=0.05"]
    )
    out = capsys.readouterr().out
    assert code == 0
    (roles,) = ran_with
    assert roles.false_alarm == pytest.approx(2 / 12) and roles.no_verdict == 0.05
    assert roles.variant_correlation == RoleParams().variant_correlation  # not measured
    assert "lab parameters from the calibration calibration.json:" in out
    assert "false_alarm = 0.167" in out
    # the --lab line names what it overrode and what stays as measured
    assert (
        "lab parameters moved: no_verdict = 0.05 (over --calibration) (false_alarm as"
        " measured, grader_noise as measured, review_reject_false as measured,"
        " review_confirm_real as measured, the others central)"
    ) in out
    # the fake's reviewer confirms every finding: structure-first's two false alarms on p2
    # stand, and every finding on a flawed proof is upheld
    assert roles.review_reject_false == 0.0 and roles.review_confirm_real == 1.0
    # the fake's graders read the grade written in the proof: no 6 on a proof graded 7
    assert roles.grader_noise == 0.0
    assert "grader_noise = 0.000 [0.000, " in out
    assert "\ndefault " in out  # the table, at the measured values


def test_a_calibration_sets_the_lab_reviewer_parameters_it_measured(tmp_path: Path) -> None:
    rows = [
        ("p1", "Complete ODD. GRADE=7", 7),  # structure-first's false alarm, rejected
        ("p2", "Complete ODD KEEP. GRADE=7", 7),  # the same false alarm, confirmed
        ("p3", "FLAW here. GRADE=0", 0),  # four findings, confirmed
        ("p4", "SUBTLE gap ODD. GRADE=2", 2),  # four findings, rejected
    ]
    out, _ = calibrate_with_variants(tmp_path, rows, judging_reviewer)
    moves, lines = calibrated.lab_moves(out / "calibration.json")
    found = dict(moves)
    assert found["review_reject_false"] == pytest.approx(0.5)
    assert found["review_confirm_real"] == pytest.approx(0.5)
    text = "\n".join(lines)
    assert "review_reject_false = 0.500 [" in text
    assert "2 of 4 blocking findings on proofs graded 7 overturned" in text
    assert "4 of 8 blocking findings on flawed proofs upheld, 50% of them taken as false" in text


def test_a_calibration_with_comparisons_sets_the_selector_accuracy(tmp_path: Path) -> None:
    file = tmp_path / "graded.jsonl"
    rows = [("a", "Complete. GRADE=7", 7), ("b", "Gap. GRADE=2", 2), ("c", "Fine. GRADE=7", 7)]
    write_graded(file, rows, problems={"a": "Show q.", "b": "Show q.", "c": "Show q."})
    out = tmp_path / "cal"
    # its selector answers "A" every time: half its choices take the proof graded higher
    with FakeEndpoint(calibration_grader) as fake:
        args = ["calibrate", str(file), "--out", str(out), "--endpoint", fake.url + "/v1"]
        result = CliRunner().invoke(eval_group, [*args, "--graders", "1", "--comparisons"])
    assert result.exit_code == 0, result.output
    # no verifications: the verifier and reviewer stay at the centre, the selector is measured
    moves, lines = calibrated.lab_moves(out / "calibration.json")
    assert dict(moves) == {"selector_accuracy": 0.0, "grader_noise": 0.0}
    text = "\n".join(lines)
    assert "selector_accuracy = 0.000 [" in text
    assert "2 of 4 choices took the proof humans graded higher (2 w - 1)" in text
    assert "review_reject_false: not measured (the calibration has no reviews" in text


def test_the_selector_accuracy_is_twice_the_winning_share_less_one() -> None:
    found = calibrated.selector_measured({"choices": 40, "chose_higher": 34})
    assert found.value == pytest.approx(0.7)
    assert found.interval is not None and found.interval[0] < 0.7 < found.interval[1]
    assert calibrated.selector_measured({"choices": 10, "chose_higher": 3}).value == 0.0
    assert calibrated.selector_measured(None).value is None
    assert calibrated.selector_measured({"choices": 0, "chose_higher": 0}).value is None
    with pytest.raises(ValueError, match="more often than they chose"):
        calibrated.selector_measured({"choices": 2, "chose_higher": 3})
    with pytest.raises(ValueError, match="choices is not a count"):
        calibrated.selector_measured({"choices": "many", "chose_higher": 3})


def _reviews(correct: dict[str, int], flawed: dict[str, int]) -> dict[str, Any]:
    return {"on_correct": correct, "on_flawed": flawed}


def test_the_confirm_rate_is_what_is_upheld_beyond_the_expected_false_alarms() -> None:
    # 10 false findings in 100 verdicts on correct proofs, 8 overturned: reject 0.8. On the
    # flawed proofs 40 verdicts, 20 findings, of which 40 x 0.1 = 4 (a fifth) taken as false;
    # upheld 14 of 20 = 0.7 = c x 0.8 + 0.2 x 0.2, so c = 0.825
    correct = {"verdicts": 100, "findings": 10, "upheld": 2, "overturned": 8}
    flawed = {"verdicts": 40, "findings": 20, "upheld": 14, "overturned": 6}
    found = {m.name: m for m in calibrated.reviewer_measured(_reviews(correct, flawed))}
    assert found["review_reject_false"].value == pytest.approx(0.8)
    confirm = found["review_confirm_real"]
    assert confirm.value == pytest.approx(0.825)
    assert confirm.interval is not None and confirm.interval[0] < 0.825 < confirm.interval[1]
    # as many findings on the flawed proofs as false alarms would give: nothing to measure
    noisy = {"verdicts": 200, "findings": 20, "upheld": 14, "overturned": 6}
    found = {m.name: m for m in calibrated.reviewer_measured(_reviews(correct, noisy))}
    assert found["review_confirm_real"].value is None
    assert found["review_reject_false"].value == pytest.approx(0.8)
    # a calibration made before reviews were recorded keeps the lab's centre for both
    assert all(m.value is None for m in calibrated.reviewer_measured(None))
    # counts that do not add up are refused
    broken = {"verdicts": 10, "findings": 2, "upheld": 2, "overturned": 1}
    with pytest.raises(ValueError, match="decides more findings than it has"):
        calibrated.reviewer_measured(_reviews(broken, flawed))
    with pytest.raises(ValueError, match="upheld is not a count"):
        calibrated.reviewer_measured(_reviews({**correct, "upheld": -1}, flawed))


def test_the_grader_noise_is_twice_the_share_of_sixes_on_proofs_graded_seven() -> None:
    items = [
        {"human": 7, "grader_scores": [7, 6, 7, None]},  # None: no grade read, left out
        {"human": 7.0, "grader_scores": [6, 2]},  # 2 is no slip by one: counted apart
        {"human": 3, "grader_scores": [0, 0]},  # not a correct proof: not used
        {"human": 7, "grader_scores": []},
    ]
    found = calibrated.grader_measured(items)
    assert found.value == pytest.approx(2 * 2 / 4)
    assert found.interval is not None and found.interval[1] == 1.0  # held to a share
    assert "twice the 2 grades of 6 in 4 grades" in found.line()
    assert "1 more than one below, left out" in found.line()
    assert calibrated.grader_measured([{"human": 0, "grader_scores": [0]}]).value is None
    unread = calibrated.grader_measured([{"human": 7, "grader_scores": [None, None]}])
    assert unread.value is None
    assert "grader_noise: not measured (no grade of a proof humans graded 7)" in unread.line()
    for hostile in ([{"human": 7, "grader_scores": [9]}], [{"human": "7"}], ["row"], {}):
        with pytest.raises(ValueError):
            calibrated.grader_measured(hostile)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "not JSON"),
        ('{"format": "other"}', "not a calibration.json"),
        ('{"format": "solver-calibration/1", "verifiers": null}', "--verifications N"),
        (
            json.dumps(
                {
                    "format": "solver-calibration/1",
                    "verifiers": {"variants": {"stepwise": {"verifications_of_correct": -1}}},
                }
            ),
            "not a count",
        ),
    ],
)
def test_a_file_that_is_not_a_calibration_is_refused_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    path = tmp_path / "calibration.json"
    path.write_text(content)
    assert policy.main(["--calibration", str(path), "--sessions", "1"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    link = tmp_path / "link.json"
    link.symlink_to(path)
    assert policy.main(["--calibration", str(link), "--sessions", "1"]) == 2
    assert "cannot be read" in capsys.readouterr().err


def _serve_bench(path: Path, rates: dict[int, float | None], second: bool = False) -> Path:
    """A summary as ``solver serve bench --out`` writes it, with these median per-user rates
    (a second endpoint, twice as fast, after the first when ``second``)."""
    endpoints = ["http://127.0.0.1:30000/v1"] + (["http://127.0.0.1:30001/v1"] if second else [])

    def level(endpoint: str, c: int, rate: float | None) -> LevelResult:
        per_user = {"p10": rate, "p50": rate, "p90": rate, "mean": rate}
        ttft = {"p50": 100.0, "p90": 200.0, "p99": 300.0}
        total = (rate or 0.0) * c
        return LevelResult(endpoint, c, 60.0, 10, 0, 0, int(total * 60), total, per_user, ttft)

    results = [
        level(endpoint, c, None if rate is None else rate * (1 + i))
        for i, endpoint in enumerate(endpoints)
        for c, rate in rates.items()
    ]
    options = BenchOptions(concurrency=tuple(rates), duration=60.0)
    path.write_text(json.dumps(summary_json(results, options)))
    return path


def test_a_serve_bench_gives_the_labs_gpu_its_decode_rate_and_saturation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    gpu = GpuModel(decode_tok_s=40.0, saturation=16.0)
    rates: dict[int, float | None] = {c: 40.0 / gpu.slowdown(c) for c in (1, 4, 16, 32)}
    rates[64] = None  # a level whose requests all failed measures no rate
    path = _serve_bench(tmp_path / "bench.json", rates, second=True)
    moves, lines = calibrated.gpu_moves(path)
    found = dict(moves)
    assert found["decode_tok_s"] == pytest.approx(40.0)  # the first endpoint's
    assert found["saturation"] == pytest.approx(16.0)
    assert "(of 2 endpoints, the first)" in lines[0] and len(lines) == 2 + 4
    ran_with: list[GpuModel] = []
    run_all = policy.run_all

    def recorded(*args: Any, **kwargs: Any) -> Any:
        ran_with.append(args[4])  # the lab's GPU
        return run_all(*args, **kwargs)

    monkeypatch.setattr(policy, "run_all", recorded)
    argv = ["--serve-bench", str(path), "--sessions", "1", "--problems", "P1"]
    assert policy.main([*argv, "--policies", "default", "--audit-every", "0"]) == 0
    assert "decode_tok_s = 40.0, saturation = 16.0" in capsys.readouterr().out
    (used,) = ran_with
    assert used.decode_tok_s == pytest.approx(40.0) and used.saturation == pytest.approx(16.0)
    assert used.prefill_tok_s == GpuModel().prefill_tok_s


def test_calls_past_the_concurrencies_a_serve_bench_measured_are_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fitted curve is known only up to the bench's highest concurrency: the table says
    how many sessions ran more calls at once than that, and slots the server has cap it."""
    gpu = GpuModel(decode_tok_s=40.0, saturation=16.0)
    path = _serve_bench(tmp_path / "bench.json", {c: 40.0 / gpu.slowdown(c) for c in (1, 2)})
    argv = ["--serve-bench", str(path), "--sessions-override", "1", "--problems", "P1", "--quick"]
    argv += ["--policies", "default", "--audit-every", "0"]
    assert policy.main(argv) == 0
    out = capsys.readouterr().out
    assert "1 of 1 sessions ran more than the serve bench's 2 at once" in out
    assert policy.main([*argv, "--lab", "slots=2"]) == 0
    out = capsys.readouterr().out
    assert "0 of 1 sessions ran more than the serve bench's 2 at once" in out
    assert "1 of 1 sessions queued past 2 slots" in out


@pytest.mark.parametrize(
    ("rates", "message"),
    [
        ({8: 30.0}, "two concurrencies"),
        ({1: 30.0, 8: 30.0}, "say so with --lab slots=1 --lab decode_tok_s=30"),
        ({1: 30.0, 8: 45.0}, "does not fall with concurrency"),
        ({1: -3.0, 8: 30.0}, "not a positive rate"),
    ],
)
def test_a_serve_bench_the_gpu_model_cannot_fit_is_refused_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rates: dict[int, float], message: str
) -> None:
    path = _serve_bench(tmp_path / "bench.json", dict(rates))
    assert policy.main(["--serve-bench", str(path), "--sessions", "1"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    path.write_text('{"levels": []}')
    assert policy.main(["--serve-bench", str(path), "--sessions", "1"]) == 2
    assert "not a summary of solver serve bench" in capsys.readouterr().err
