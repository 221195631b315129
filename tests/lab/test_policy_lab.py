"""The policy lab: the simulated model answers from hidden proof states (a wrong approach no
revision fixes included), the loop runs on it unchanged (the audit passes), the same seed gives
the same decisions in process and over real HTTP (the CI smoke test of ``bench/policy.py``),
false accepts are traced to their cause, and the stop check and the sweep count what they say."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from solver.config import resolve_settings
from solver.loop.policy import PolicyConfig
from solver.run import policy_config
from solver.testing import LabModel, ProblemParams, RecordedRequest, RoleParams

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import policy  # noqa: E402  (bench/policy.py)

VERIFIER_SYSTEM = "You are a meticulous grader: find every error and every gap."
GENERATOR_SYSTEM = "You are an expert writing a solution to an olympiad problem."


def _request(system: str, user: str, max_tokens: int = 100_000) -> RecordedRequest:
    body = {
        "model": "m",
        "max_tokens": max_tokens,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }
    raw = json.dumps(body).encode()
    return RecordedRequest(api="chat", path="/v1/chat/completions", headers={}, body=raw, json=body)


def test_verifier_finds_visible_flaws_and_never_hidden_ones() -> None:
    always = ProblemParams("X", p_correct=0.0, p_critical=1.0, detect=1.0, p_hidden=0.0, fix=1.0)
    never = ProblemParams("Y", p_correct=0.0, p_critical=1.0, detect=1.0, p_hidden=1.0, fix=1.0)
    quiet = RoleParams(false_alarm=0.0, minor_rate=0.0, no_verdict=0.0)
    for params, expected in ((always, "fail"), (never, "pass")):
        lab = LabModel(params, quiet, seed=3)
        proof = lab(_request(GENERATOR_SYSTEM, "Problem.")).text
        verdict = lab(_request(VERIFIER_SYSTEM, f"# Proof\n\n{proof}")).text
        assert f'"verdict": "{expected}"' in verdict
        (state,) = lab.proofs.values()
        assert not state.correct and state.score < 7


def test_identical_requests_are_independent_samples_and_cut_at_max_tokens() -> None:
    lab = LabModel(policy.PROBLEMS[0], RoleParams(), seed=1)
    request = _request(GENERATOR_SYSTEM, "Problem.", max_tokens=100)
    first, second = lab(request), lab(request)
    assert first.text != second.text  # temperature > 0: the second draw is a new proof
    assert first.finish_reason == "length" and first.usage is not None
    assert first.usage[1] == 100
    assert "## Self-assessment" not in first.text  # cut mid-answer
    again = LabModel(policy.PROBLEMS[0], RoleParams(), seed=1)
    assert again(request).text == first.text  # and a seed replays exactly


@pytest.mark.parametrize("policy_name", ["default"])
def test_a_lab_session_audits_and_replays_over_http(tmp_path: Path, policy_name: str) -> None:
    chosen = next(p for p in policy.POLICIES if p.name == policy_name)
    params, roles, gpu = policy.PROBLEMS[0], RoleParams(), policy.GpuModel()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    seam = policy.run_session(tmp_path / "a", chosen, params, roles, gpu, 0, 600_000)
    wire = policy.run_session(tmp_path / "b", chosen, params, roles, gpu, 0, 600_000, http=True)
    assert seam.audit_ok and wire.audit_ok
    assert seam.decisions == wire.decisions
    assert (seam.decode, seam.prefill, seam.wall_s) == (wire.decode, wire.prefill, wire.wall_s)
    assert seam.calls > 5 and seam.wall_s > 0


def test_a_thinking_budget_is_sent_and_costs_the_same_in_process_and_over_http(
    tmp_path: Path,
) -> None:
    """A policy with a thinking budget meets the lab as SGLang with the processor on: the
    budget reaches the model both ways (the session differs from the unbudgeted one) and the
    two transports still agree call for call."""
    default = next(p for p in policy.POLICIES if p.name == "default")
    budgeted = replace(
        default,
        name="default+budget",
        flags={**default.flags, "roles.generator.thinking_budget": 2000},
    )
    params, roles, gpu = policy.PROBLEMS[0], RoleParams(budget_cost=1.0), policy.GpuModel()
    runs = {}
    for name, chosen, http in (
        ("plain", default, False),
        ("seam", budgeted, False),
        ("wire", budgeted, True),
    ):
        (tmp_path / name).mkdir()
        runs[name] = policy.run_session(
            tmp_path / name, chosen, params, roles, gpu, 0, 600_000, http=http
        )
    seam, wire = runs["seam"], runs["wire"]
    assert seam.audit_ok and wire.audit_ok
    assert seam.decisions == wire.decisions and seam.decode == wire.decode
    assert seam.decode != runs["plain"].decode  # the budget shortened the generators' calls


def test_the_quick_setting_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    code = policy.main(["--quick", "--policies", "default", "--sessions-override", "1"])
    out = capsys.readouterr().out
    assert code == 0
    assert "strict /42" in out and "default" in out


def test_lab_parameters_moved_together_are_named_on_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    quick = ["--quick", "--policies", "default", "--sessions-override", "1", "--problems", "P1"]
    code = policy.main([*quick, "--lab", "false_alarm=0", "--lab", "no_verdict=0"])
    out = capsys.readouterr().out
    assert code == 0
    assert "lab parameters moved: false_alarm = 0, no_verdict = 0 (the others central)" in out


def test_a_server_with_one_slot_serialises_the_calls_and_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--lab slots=1``: the same session's calls run one after another, so its wall time
    grows, and the table says how many calls were waiting at once."""
    quick = ["--quick", "--policies", "default", "--sessions-override", "1", "--problems", "P1"]
    walls = {}
    for slots in ("0", "1"):
        assert policy.main([*quick, "--audit-every", "0", "--json", "--lab", f"slots={slots}"]) == 0
        out = capsys.readouterr().out
        (row,) = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        walls[slots] = row["wall_s"]
        assert row["peak_in_flight"] > 1
        assert "calls on the GPU at once (running or waiting for a slot):" in out
    assert walls["1"] > 1.5 * walls["0"]
    assert "1 of 1 sessions queued past 1 slots" in out


REVISER_SYSTEM = "You are revising a proof of an olympiad problem."


def test_a_wrong_approach_survives_every_revision_and_scores_little() -> None:
    wrong = ProblemParams(
        "W", p_correct=0.0, p_critical=0.0, detect=1.0, p_hidden=0.0, fix=1.0, p_wrong=1.0
    )
    lab = LabModel(wrong, RoleParams(revise_new_flaw=0.0, revise_collateral_fix=1.0), seed=5)
    proof = lab(_request(GENERATOR_SYSTEM, "Problem.")).text
    (state,) = lab.proofs.values()
    assert state.wrong_approach and state.score <= 1
    (flaw,) = state.flaws
    assert flaw.severity == "critical" and not flaw.fixable
    for _ in range(5):  # even with the flaw confirmed and a fix rate of 1
        findings = f"# Confirmed findings\n\nStep {flaw.key}: the claim does not follow."
        proof = lab(_request(REVISER_SYSTEM, f"# Proof\n\n{proof}\n\n{findings}")).text
        (revised,) = lab.proofs_in(proof)
        assert revised.flaws == (flaw,)
    fixable = replace(wrong, name="F", p_wrong=0.0)
    lab = LabModel(fixable, RoleParams(revise_new_flaw=0.0), seed=5)
    proof = lab(_request(GENERATOR_SYSTEM, "Problem.")).text
    (state,) = lab.proofs.values()
    marks = "\n".join(f"Step {f.key}: it fails." for f in state.flaws)
    revised_text = lab(
        _request(REVISER_SYSTEM, f"# Proof\n\n{proof}\n\n# Confirmed findings\n\n{marks}")
    ).text
    assert lab.proofs_in(revised_text)[0].correct  # a fixable flaw goes at fix rate 1


def test_false_accepts_of_invisible_flaws_are_counted_as_hidden(tmp_path: Path) -> None:
    invisible = ProblemParams("H", p_correct=0.0, p_critical=1.0, detect=1.0, p_hidden=1.0, fix=0.5)
    chosen = next(p for p in policy.POLICIES if p.name == "default")
    quiet = RoleParams(false_alarm=0.0, no_verdict=0.0)
    s = policy.run_session(tmp_path, chosen, invisible, quiet, policy.GpuModel(), 0, 1_500_000)
    assert s.accepted >= 1 and s.false_accepts == s.accepted
    assert s.false_causes == {"hidden": s.accepted}
    assert s.audit_ok and not s.stopped_early
    out = policy.false_accepts([s], (chosen,))
    assert f"{s.accepted}/{s.accepted}" in out


@pytest.mark.parametrize("name", ["hy", "dsm"])
def test_the_baselines_verify_with_one_prompt_as_their_code_does(tmp_path: Path, name: str) -> None:
    chosen = next(p for p in policy.POLICIES if p.name == name)
    resolved = resolve_settings(flags=policy.settings_for(tmp_path, chosen, 1, 9), env={})
    config = policy_config(resolved.settings, evaluation=False, material=False)
    assert config.variants["verifier"] == config.variants["verifier:check"] == ("stepwise",)
    assert len(config.variants["generator"]) == 3  # their writers are not the point here


def test_the_baselines_take_what_they_do_not_name_from_their_code_not_from_our_defaults(
    tmp_path: Path,
) -> None:
    by_name = {p.name: p for p in policy.POLICIES}

    def config_of(name: str) -> PolicyConfig:
        flags = policy.settings_for(tmp_path, by_name[name], 1, 9)
        return policy_config(
            resolve_settings(flags=flags, env={}).settings, evaluation=False, material=False
        )

    hy, dsm = config_of("hy"), config_of("dsm")
    # neither runs a reviewer, nor checks final answers (issue 19's own additions)
    for cfg in (hy, dsm):
        assert not cfg.review and not cfg.recheck_answers and not cfg.answers_agree
    # H&Y: a second turn first, one verification at a time, a report without "yes" fails,
    # the latest solution is corrected
    assert hy.self_improve and hy.verify_stage == 1 and hy.cancel_on_blocking
    assert not hy.reverify_no_verdict and not hy.best_version
    # DeepSeek-Math-V2: every verification runs to its end; refine the best by mean score
    assert dsm.verify_stage == 0 and not dsm.cancel_on_blocking and dsm.best_version
    assert not dsm.self_improve
    # and in a session: H&Y's calls include second turns and no review
    invisible = ProblemParams(
        "X", p_correct=0.5, p_critical=0.5, detect=0.7, p_hidden=0.0, fix=0.5, p_wrong=0.0
    )
    s = policy.run_session(
        tmp_path, by_name["hy"], invisible, RoleParams(), policy.GpuModel(), 0, 1_500_000
    )
    assert s.by_role.get("generator:improve", 0) >= 1 and not s.by_role.get("reviewer")
    assert s.audit_ok


def test_the_stop_check_counts_a_search_that_gave_up_with_budget_left(tmp_path: Path) -> None:
    """Lineages capped at 3 x candidates (the defaults before issue 19) and every proof on a
    wrong approach: the old rules run out of lineages long before the budget, and the check
    must say so; the budget-driven default goes on until the budget is used."""
    hopeless = ProblemParams(
        "X", p_correct=0.0, p_critical=1.0, detect=1.0, p_hidden=0.0, fix=1.0, p_wrong=1.0
    )
    quiet = RoleParams(false_alarm=0.0, no_verdict=0.0)
    gpu = policy.GpuModel()
    by_name = {p.name: p for p in policy.POLICIES}
    # One candidate, so the old cap is 3 lineages, not 12: the same rule in a quarter of the time.
    old = by_name["before"]
    old = policy.Policy(old.name, old.source, {**old.flags, "candidates": 1}, old.baseline)
    before = policy.run_session(tmp_path, old, hopeless, quiet, gpu, 0, 20_000_000)
    assert before.stopped_early and before.left == "no lineage can go on"
    assert before.abandoned == 3 and before.abandoned_fixable == 0
    now = policy.run_session(tmp_path, by_name["default"], hopeless, quiet, gpu, 0, 400_000)
    assert not now.stopped_early and now.left.startswith("token budget")
    lines = policy.stop_check([before, now], (by_name["before"], by_name["default"]))
    assert "before      1 of 1 runs stopped with budget left" in lines
    assert "default     0 of 1 runs stopped" in lines


def test_the_sweep_moves_one_parameter_and_compares_each_policy_with_each_baseline() -> None:
    roles, gpu, problems = policy.swept("p_wrong", 1.5, policy.PROBLEMS)
    assert [p.p_wrong for p in problems] == [min(p.p_wrong * 1.5, 1.0) for p in policy.PROBLEMS]
    assert roles == RoleParams() and gpu == policy.GpuModel()
    roles, _, _ = policy.swept("lengths", 0.5, policy.PROBLEMS)
    assert roles.lengths["generator"][0] == RoleParams().lengths["generator"][0] // 2
    _, gpu, _ = policy.swept("saturation", 8.0, policy.PROBLEMS)
    assert gpu.saturation == 8.0
    assert policy.swept("centre", 0.0, policy.PROBLEMS)[2] == policy.PROBLEMS
    assert set(policy.SWEEP) >= {
        "false_alarm", "p_hidden", "fix", "detect", "lengths", "decode_tok_s", "saturation",
        "p_wrong", "review_confirm_real", "review_reject_false",
    }  # fmt: skip
    mean, low, high = policy.difference({"P": [7, 7, 7, 0]}, {"P": [0, 0, 7, 0]})
    assert mean == 3.5 and low <= mean <= high
    assert policy.difference({"P": [7] * 4}, {"P": [0] * 4}) == (7.0, 7.0, 7.0)
    assert {p.name for p in policy.POLICIES if p.baseline} == {"before", "hy", "dsm", "dsm-minor"}


def test_a_checkers_blind_spots_are_as_many_as_configured_and_correlated_as_configured() -> None:
    half = ProblemParams("H", p_correct=0.0, p_critical=1.0, detect=1.0, p_hidden=0.3, fix=0.5)
    drawn = {}
    for rho, share in ((0.0, 1.0), (0.5, 1.0), (1.0, 1.0), (0.5, 0.5)):
        roles = replace(RoleParams(), blind_spot_correlation=rho, checker_blind_share=share)
        lab = LabModel(half, roles, seed=3)
        for i in range(3000):
            lab(_request(GENERATOR_SYSTEM, f"Problem {i}."))
        flaws = [f for state in lab.proofs.values() for f in state.flaws]
        hidden = [f for f in flaws if f.detect == 0.0]
        both = [f for f in hidden if f.detect_other == 0.0]
        other = [f for f in flaws if f.detect_other == 0.0]
        p, q = 0.3, 0.3 * share
        assert len(flaws) > 2000
        assert abs(len(other) / len(flaws) - q) < 0.03  # as many blind spots as configured
        expected = q + rho * math.sqrt(q * (1 - q) * (1 - p) / p)  # P(hidden | hidden)
        assert abs(len(both) / len(hidden) - expected) < 0.04
        drawn[rho, share] = [(f.key, f.detect) for f in flaws]
    # the first family's draws do not depend on the checker's parameters
    assert len({tuple(v) for v in drawn.values()}) == 1


def test_verifier_variants_share_blind_spots_as_far_as_variant_correlation_says() -> None:
    # one flaw a proof, visible with certainty unless hidden (p_hidden 0.3)
    half = ProblemParams("H", p_correct=0.0, p_critical=1.0, detect=1.0, p_hidden=0.3, fix=0.5)
    quiet = RoleParams(false_alarm=0.0, minor_rate=0.0, no_verdict=0.0)
    stepwise = "You are a meticulous grader: find every error and every gap."
    adversarial = "You are a sceptical grader: find every error and every gap."
    for rho in (1.0, 0.5, 0.0):
        lab = LabModel(half, replace(quiet, variant_correlation=rho), seed=5)
        blind = {stepwise: 0, adversarial: 0}
        both = hidden = 0
        proofs = 1500
        for i in range(proofs):
            proof = lab(_request(GENERATOR_SYSTEM, f"Problem {i}.")).text
            (state,) = lab.proofs_in(proof)
            if len(state.flaws) > 1:
                continue  # the second flaw, when drawn, would blur the count
            passed = {}
            for system in blind:
                text = lab(_request(system, f"# Proof\n\n{proof}")).text
                passed[system] = '"verdict": "pass"' in text
                blind[system] += passed[system]
            both += all(passed.values())
            hidden += lab.hidden(state)
        single = proofs - sum(1 for s in lab.proofs.values() if len(s.flaws) > 1)
        for count in blind.values():
            assert abs(count / single - 0.3) < 0.04  # each variant keeps the problem's share
        # P(both blind) = p^2 + rho p (1 - p): shared with chance rho, else independent
        assert abs(both / single - (0.09 + rho * 0.21)) < 0.04
        assert hidden == both  # hidden: no variant the run used sees the flaw
        if rho == 1.0:  # the lab before the parameter: the flaw's own draw, for every variant
            flaws = [f for state in lab.proofs.values() for f in state.flaws]
            assert all(lab._detect(f, "any") == f.detect for f in flaws)


def test_a_checker_with_complementary_blind_spots_fails_what_the_run_passes() -> None:
    # p_hidden 0.5 and correlation -1: whatever one family cannot see, the other can
    half = ProblemParams("H", p_correct=0.0, p_critical=1.0, detect=1.0, p_hidden=0.5, fix=0.5)
    quiet = RoleParams(false_alarm=0.0, minor_rate=0.0, no_verdict=0.0, blind_spot_correlation=-1)
    lab = LabModel(half, quiet, seed=7)
    seen = set()
    for i in range(40):
        proof = lab(_request(GENERATOR_SYSTEM, f"Problem {i}.")).text
        (state,) = lab.proofs_in(proof)
        own = lab(_request(VERIFIER_SYSTEM, f"# Proof\n\n{proof}")).text
        other = lab.family("other")(_request(VERIFIER_SYSTEM, f"# Proof\n\n{proof}")).text
        verdicts = ('"verdict": "pass"' in own, '"verdict": "pass"' in other)
        run_blind = [f.detect == 0.0 for f in state.flaws]
        assert verdicts == (all(run_blind), not any(run_blind))
        seen.add(verdicts)
    assert {(True, False), (False, True)} <= seen  # each sees what the other cannot
    assert lab.calls_by_role["verifier@other"] == 40


def test_a_final_round_by_a_checker_unaccepts_what_only_it_can_see(tmp_path: Path) -> None:
    # whatever the run's family cannot see, the checker can (p_hidden 0.5, correlation -1)
    invisible = ProblemParams("H", p_correct=0.0, p_critical=1.0, detect=1.0, p_hidden=0.5, fix=0.5)
    quiet = RoleParams(false_alarm=0.0, no_verdict=0.0, blind_spot_correlation=-1.0)
    chosen = next(p for p in policy.POLICIES if p.name == "checked")
    gpu = policy.GpuModel()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    s = policy.run_session(tmp_path / "a", chosen, invisible, quiet, gpu, 0, 1_500_000)
    assert s.by_role.get("verifier:check", 0) >= 10  # the final rounds went to the checker
    assert any(kind == "unaccepted" for kind, _, _ in s.decisions)
    assert s.false_accepts == 0
    assert s.audit_ok  # the checker's endpoint is declared and its calls connected only there
    assert 0 < s.checker_decode < s.decode
    assert "checker" in policy.checker_shares([s], (chosen,))
    wire = policy.run_session(
        tmp_path / "b", chosen, invisible, quiet, gpu, 0, 1_500_000, http=True
    )
    assert wire.decisions == s.decisions and wire.audit_ok


def _row(name: str, problem: str, decode: int, accepted: int, false: int) -> policy.Session:
    return policy.Session(
        policy=name,
        problem=problem,
        seed=0,
        outcome="solved",
        strict=7,
        partial=7,
        accepted=accepted,
        false_accepts=false,
        decode=decode,
        prefill=0,
        cancelled_decode=0,
        wall_s=1.0,
        calls=1,
        audit_ok=None,
    )


def test_the_decode_ratio_is_per_accepted_correct_proof_with_an_interval() -> None:
    rows = [
        _row("a", "P1", 100, 2, 0),
        _row("a", "P1", 300, 2, 1),  # a: 400 decode for 3 correct proofs
        _row("b", "P1", 400, 1, 0),
        _row("b", "P1", 400, 2, 1),  # b: 800 for 2
    ]
    found = policy.decode_ratio(rows, "a", "b")
    assert found is not None
    ratio, low, high = found
    assert ratio == pytest.approx((400 / 3) / (800 / 2))
    assert low <= ratio <= high and low < high
    assert policy.decode_ratio(rows, "a", "none") is None
    chosen = (policy.Policy("a", "", {}), policy.Policy("b", "", {}))
    assert policy.decode_ratios(rows, chosen, "b").split()[:2] == ["a", "0.33x"]


def test_each_policy_is_compared_with_each_baseline() -> None:
    rows = [_row("a", "P1", 1, 1, 0), _row("b", "P1", 1, 1, 0)]
    rows[1].strict = 0
    chosen = (policy.Policy("a", "", {}), policy.Policy("b", "", {}, baseline=True))
    (line,) = policy.against_baselines(rows, chosen).splitlines()
    assert line.split(":")[0].strip() == "a - b"
    assert "+7.0" in line


def test_decode_is_split_by_policy_key_and_by_what_became_of_each_lineage(
    tmp_path: Path,
) -> None:
    easy = ProblemParams("E", p_correct=1.0, p_critical=0.0, detect=1.0, p_hidden=0.0, fix=1.0)
    chosen = next(p for p in policy.POLICIES if p.name == "default")
    quiet = RoleParams(false_alarm=0.0, no_verdict=0.0)
    s = policy.run_session(tmp_path, chosen, easy, quiet, policy.GpuModel(), 0, 1_500_000)
    # the journal's usage accounts for every decoded token but those of cancelled calls
    assert sum(s.decode_by_key.values()) + s.cancelled_decode == s.decode
    assert sum(s.decode_by_fate.values()) == sum(s.decode_by_key.values())
    assert {"generator", "verifier"} <= s.decode_by_key.keys()
    # every proof is correct and passes: nothing is abandoned or accepted flawed
    assert set(s.decode_by_fate) <= {"correct", "open", "none"}
    assert s.decode_by_fate["correct"] > 0
    out = policy.decode_by_fate([s], (chosen,))
    assert out.splitlines()[0].split()[1:] == [*policy.LINEAGE_FATES, "cancelled"]
    assert policy.decode_by_key([s], (chosen,)).splitlines()[1].startswith("default")
    # a key longer than a column keeps a space before it, so the heading splits into names
    s.decode_by_key["generator:improve"] = s.decode_by_key["generator"]
    head = policy.decode_by_key([s], (chosen,)).splitlines()[0].split()
    assert head[1:] == [*sorted(s.decode_by_key), "cancelled"]


@pytest.mark.parametrize(
    ("flag", "said"),
    [
        ("bogus=1", "--lab wants NAME=VALUE"),
        ("checker_blind_share", "--lab wants NAME=VALUE"),
        ("checker_blind_share=half", "wants a number, not 'half'"),
    ],
)
def test_a_bad_lab_parameter_is_refused_with_exit_2(
    capsys: pytest.CaptureFixture[str], flag: str, said: str
) -> None:
    assert policy.main(["--quick", "--lab", flag]) == 2
    assert said in capsys.readouterr().err


UNCUT = 10**9  # max_tokens no simulated call reaches


def _final_answer(text: str) -> str:
    return text.split("## Final answer\n\n", 1)[1].split("\n", 1)[0]


def test_short_answers_are_right_unless_the_approach_is_wrong_and_survive_revision() -> None:
    mixed = ProblemParams(
        "A", p_correct=0.3, p_critical=0.5, detect=1.0, p_hidden=0.0, fix=0.5, p_wrong=0.5
    )
    roles = replace(RoleParams(), short_answers=1.0, wrong_answer=0.6, wrong_answers=2)
    lab = LabModel(mixed, roles, seed=11)
    stated: dict[str, list[str]] = {"right": [], "wrong": []}
    for i in range(2000):
        text = lab(_request(GENERATOR_SYSTEM, f"Problem {i}.", UNCUT)).text
        (state,) = lab.proofs_in(text)
        assert _final_answer(text) == state.answer
        stated["wrong" if state.wrong_approach else "right"].append(state.answer)
    assert set(stated["right"]) == {"7"}  # correct, or flawed in a step only
    wrong = stated["wrong"]
    assert len(wrong) > 500 and set(wrong) == {"7", "8", "9"}
    assert abs(sum(a != "7" for a in wrong) / len(wrong) - 0.6) < 0.05
    # a revision keeps the approach, so it keeps the answer
    wrong_text = next(
        text
        for text in (lab(_request(GENERATOR_SYSTEM, f"Other {i}.", UNCUT)).text for i in range(200))
        if lab.proofs_in(text)[0].answer != "7"
    )
    (state,) = lab.proofs_in(wrong_text)
    user = f"# Proof\n\n{wrong_text}\n\n# Confirmed findings\n\n"
    revised = lab(_request(REVISER_SYSTEM, user, UNCUT)).text
    assert _final_answer(revised) == state.answer != "7"
    # without short answers the proofs state none, as before
    plain = LabModel(mixed, RoleParams(), seed=11)
    assert (
        _final_answer(plain(_request(GENERATOR_SYSTEM, "Problem 0.", UNCUT)).text)
        == "See the proof."
    )


GRADER_SYSTEM = "Score the proof from 0 to 7."
SELECTOR_SYSTEM = "You choose which of several candidate proofs is the most rigorous."


def _grade_of(text: str) -> int:
    return int(json.loads(text.split("```json\n", 1)[1].split("\n```", 1)[0])["score"])


def test_judges_miss_what_the_verifiers_miss_unless_told_to_read_the_true_score() -> None:
    hidden = ProblemParams("H", p_correct=0.0, p_critical=1.0, detect=1.0, p_hidden=1.0, fix=0.5)
    seen = replace(hidden, name="S", p_hidden=0.0)
    exact = replace(RoleParams(), grader_noise=0.0)
    for problem, read in ((hidden, "seven"), (seen, "true")):
        for roles, truth in ((exact, False), (replace(exact, judges_see_truth=1.0), True)):
            lab = LabModel(problem, roles, seed=5)
            for i in range(40):
                text = lab(_request(GENERATOR_SYSTEM, f"Problem {i}.", UNCUT)).text
                (state,) = lab.proofs_in(text)
                grade = _grade_of(lab(_request(GRADER_SYSTEM, f"# Proof\n\n{text}", UNCUT)).text)
                assert state.score < 7
                # a flaw every verifier sees, every judge sees; a hidden one only the
                # earlier lab's all-knowing judge did
                assert grade == (7 if read == "seven" and not truth else state.score)


def test_a_selector_cannot_tell_a_hidden_flaw_from_a_correct_proof() -> None:
    mixed = ProblemParams("M", p_correct=0.5, p_critical=1.0, detect=1.0, p_hidden=1.0, fix=0.5)

    def correct_chosen(roles: RoleParams) -> float:
        lab = LabModel(mixed, roles, seed=9)
        correct = flawed = ""
        i = 0
        while not (correct and flawed):
            text = lab(_request(GENERATOR_SYSTEM, f"Problem {i}.", UNCUT)).text
            i += 1
            if lab.proofs_in(text)[0].correct:
                correct = correct or text
            else:
                flawed = flawed or text
        chosen = 0
        for trial in range(600):
            user = f"Trial {trial}.\n\n## Proof A\n\n{correct}\n\n## Proof B\n\n{flawed}"
            reply = lab(_request(SELECTOR_SYSTEM, user, UNCUT)).text
            chosen += '"choice": "A"' in reply
        return chosen / 600

    assert abs(correct_chosen(RoleParams()) - 0.5) < 0.07  # both read as full proofs
    told = correct_chosen(replace(RoleParams(), judges_see_truth=1.0))
    assert abs(told - 0.85) < 0.05  # accuracy 0.7, else a coin


def test_proofs_state_a_final_answer_where_the_problem_asks_for_one() -> None:
    asks = ProblemParams("Q", p_correct=1.0, p_critical=0.0, detect=1.0, p_hidden=0.0, fix=1.0)
    cases = (
        (replace(asks, asks_answer=True), RoleParams(), "7"),
        (asks, RoleParams(), "See the proof."),
        (
            replace(asks, asks_answer=True),
            replace(RoleParams(), answer_problems=0.0),
            "See the proof.",
        ),
        (asks, replace(RoleParams(), short_answers=1.0), "7"),
    )
    for problem, roles, stated in cases:
        lab = LabModel(problem, roles, seed=2)
        assert _final_answer(lab(_request(GENERATOR_SYSTEM, "Problem.", UNCUT)).text) == stated
    assert {p.name for p in policy.PROBLEMS if p.asks_answer} == {"P1", "P3", "P4", "P5", "P6"}


def _rows(path: Path, policy: str, strict: list[int], extra: str = "") -> None:
    rows = [policy_row(policy, f"P{1 + i % 2}", i // 2, s) for i, s in enumerate(strict)]
    path.write_text("a table line\n" + "".join(json.dumps(r) + "\n" for r in rows) + extra)


def policy_row(policy_name: str, problem: str, seed: int, strict: int) -> dict[str, object]:
    session = policy.Session(
        policy=policy_name,
        problem=problem,
        seed=seed,
        outcome="solved",
        strict=strict,
        partial=strict,
        accepted=2,
        false_accepts=0 if strict else 1,
        decode=1_000_000,
        prefill=100,
        cancelled_decode=0,
        wall_s=1.0,
        calls=10,
        audit_ok=None,
    )
    row = dict(session.__dict__)
    row.pop("decisions")
    row["checker_decode"] = session.checker_decode  # as --json writes it
    return row


def test_compare_pairs_two_json_runs_session_by_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    on, off = tmp_path / "on.jsonl", tmp_path / "off.jsonl"
    _rows(on, "default+x", [7, 7, 7, 0, 7, 7, 0, 0])
    _rows(off, "default", [7, 0, 7, 0, 7, 0, 0, 0], extra="trailing text\n")
    assert policy.main(["--compare", str(on), str(off)]) == 0
    out = capsys.readouterr().out
    # P1 sessions: 7,7,7,0 against 7,7,7,0; P2: 7,0,7,0 against 0,0,0,0: +3.5 a problem set
    assert "paired difference: +3.50" in out and "over 8 sessions, 2 differ" in out
    assert "differ (first's strict score, then second's): P2 seed 0 7-0, P2 seed 2 7-0;" in out
    assert "first higher in 2, second in 0" in out
    # equal decode; correct proofs 2 a solved session, 1 otherwise: 13 against 11
    assert "first over second: 0.846x" in out


def test_compare_refuses_rows_of_several_policies_or_no_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(
        json.dumps(policy_row("a", "P1", 0, 7)) + "\n" + json.dumps(policy_row("b", "P1", 0, 7))
    )
    assert policy.main(["--compare", str(mixed), str(mixed)]) == 2
    assert "use FILE:POLICY" in capsys.readouterr().err
    assert policy.main(["--compare", f"{mixed}:a", f"{mixed}:b"]) == 0
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    assert policy.main(["--compare", str(tmp_path / "bad.jsonl"), str(mixed)]) == 2
    assert "line 1: not a session row" in capsys.readouterr().err
    assert policy.main(["--compare", str(tmp_path / "missing"), str(mixed)]) == 2
    assert "cannot be read" in capsys.readouterr().err


def test_repairs_nobody_aimed_at_reach_a_hidden_flaw_only_with_hidden_repair() -> None:
    hidden = ProblemParams("H", p_correct=0.0, p_critical=1.0, detect=1.0, p_hidden=1.0, fix=1.0)
    seen = replace(hidden, name="S", p_hidden=0.0)
    eager = RoleParams(revise_collateral_fix=1.0, self_fix_factor=1.0, revise_new_flaw=0.0)

    def repaired(problem: ProblemParams, roles: RoleParams) -> tuple[bool, bool]:
        lab = LabModel(problem, roles, seed=4)
        proof = lab(_request(GENERATOR_SYSTEM, "Problem.", UNCUT)).text
        # a revision with no confirmed finding: any fix is collateral
        revised = lab(_request(REVISER_SYSTEM, f"# Proof\n\n{proof}\n\n# Confirmed findings\n\n"))
        # the self-improvement turn: its own proof in the conversation, then a request
        body = {
            "model": "m",
            "max_tokens": UNCUT,
            "messages": [
                {"role": "system", "content": GENERATOR_SYSTEM},
                {"role": "user", "content": "Problem."},
                {"role": "assistant", "content": proof},
                {"role": "user", "content": "Check your solution and improve it."},
            ],
        }
        raw = json.dumps(body).encode()
        turn = RecordedRequest(
            api="chat", path="/v1/chat/completions", headers={}, body=raw, json=body
        )
        improved = lab(turn)
        return (
            lab.proofs_in(revised.text)[0].correct,
            lab.proofs_in(improved.text)[0].correct,
        )

    assert repaired(seen, eager) == (True, True)  # a flaw the family sees: every rewrite fixes it
    assert repaired(hidden, eager) == (False, False)  # one it cannot see: no rewrite aims at it
    assert repaired(hidden, replace(eager, hidden_repair=1.0)) == (True, True)  # the earlier lab


def test_a_borrowed_idea_reaches_a_hidden_flaw_only_with_hidden_repair() -> None:
    hidden = ProblemParams("H", p_correct=0.0, p_critical=1.0, detect=1.0, p_hidden=1.0, fix=1.0)
    lender = replace(hidden, name="L", p_correct=1.0)
    borrowing = RoleParams(
        recombine_borrow=1.0, recombine_inherit=0.0, revise_collateral_fix=0.0, revise_new_flaw=0.0
    )

    def recombined(roles: RoleParams) -> bool:
        lab = LabModel(hidden, roles, seed=6)
        flawed = lab(_request(GENERATOR_SYSTEM, "Problem.", UNCUT)).text
        # a correct proof to borrow from, written by the same session's model
        lab.problem = lender
        correct = lab(_request(GENERATOR_SYSTEM, "Another.", UNCUT)).text
        lab.problem = hidden
        assert not lab.proofs_in(flawed)[0].correct and lab.proofs_in(correct)[0].correct
        # the flawed proof has no confirmed finding, so it is the base; the correct one lends
        user = (
            "Problem.\n\n## Attempt 1\n\n" + flawed + "\n\n### Confirmed findings\n\nNone."
            "\n## Attempt 2\n\n" + correct + "\n\n### Confirmed findings\n\n"
            "### Finding C1\n\nStep S0: unclear.\n### Finding C2\n\nStep S1: unclear."
        )
        system = "You are given several attempted proofs of an olympiad problem."
        return lab.proofs_in(lab(_request(system, user, UNCUT)).text)[0].correct

    assert not recombined(borrowing)  # the base's step reads as sound to the family
    assert recombined(replace(borrowing, hidden_repair=1.0))  # the earlier lab repaired it


def _encoded(
    system: str, user: str, budget: int | None = None, max_tokens: int = UNCUT
) -> RecordedRequest:
    """A request as the client encodes it (orjson, keys sorted), with a thinking budget in
    SGLang's field where one is given."""
    body: dict[str, object] = {
        "model": "m",
        "max_tokens": max_tokens,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }
    if budget is not None:
        body["custom_params"] = {"thinking_budget": budget}
    raw = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    return RecordedRequest(
        api="chat", path="/v1/chat/completions", headers={}, body=raw, json=json.loads(raw)
    )


def test_a_thinking_budget_costs_work_in_proportion_to_the_reasoning_it_cuts() -> None:
    """A budget that cuts a writer's reasoning adds flaws to its proofs and makes a verifier
    miss flaws, in proportion to ``budget_cost`` and the share cut; with no cost, or a budget
    the call never reaches, the answers are the unbudgeted ones draw for draw."""
    correct = ProblemParams("C", p_correct=1.0, p_critical=1.0, detect=1.0, p_hidden=0.0, fix=1.0)
    flawed = replace(correct, name="F", p_correct=0.0)
    quiet = RoleParams(false_alarm=0.0, minor_rate=0.0, no_verdict=0.0)

    def flawed_share(roles: RoleParams, budget: int, seeds: int = 200) -> float:
        lab = LabModel(correct, roles, seed=0)
        made = [lab(_encoded(GENERATOR_SYSTEM, f"Problem {i}.", budget)) for i in range(seeds)]
        return sum(not lab.proofs_in(r.text)[0].correct for r in made) / seeds

    def missed_share(roles: RoleParams, budget: int, seeds: int = 200) -> float:
        lab = LabModel(flawed, roles, seed=0)
        missed = 0
        for i in range(seeds):
            proof = lab(_request(GENERATOR_SYSTEM, f"Problem {i}.", UNCUT)).text
            report = lab(_encoded(VERIFIER_SYSTEM, f"# Proof\n\n{proof}", budget)).text
            missed += '"verdict": "pass"' in report
        return missed / seeds

    free = replace(quiet, budget_cost=0.0)
    dear = replace(quiet, budget_cost=1.0)
    assert flawed_share(free, 100) == 0.0 and missed_share(free, 100) == 0.0
    # a budget of 100 tokens cuts nearly all of a 30k-token reasoning: nearly every call loses
    assert flawed_share(dear, 100) > 0.9 and missed_share(dear, 100) > 0.9
    # about half of a median reasoning cut (12k of 24k): well under every call losing
    assert 0.2 < flawed_share(dear, 12_000) < 0.65
    # half the cost, about half the loss
    assert 0.3 < flawed_share(replace(quiet, budget_cost=0.5), 100) < 0.7
    # a budgeted call draws as the same call without a budget: one it never reaches changes
    # nothing, and one it reaches changes only the tokens (and, at a cost, the work) it cuts
    unbudgeted = _encoded(GENERATOR_SYSTEM, "Problem.")
    plain = LabModel(correct, dear, seed=2)(unbudgeted)
    far = LabModel(correct, dear, seed=2)(_encoded(GENERATOR_SYSTEM, "Problem.", 10**7))
    assert (far.text, far.usage) == (plain.text, plain.usage)
    near = LabModel(correct, free, seed=2)(_encoded(GENERATOR_SYSTEM, "Problem.", 100))
    assert near.text == plain.text and near.usage is not None and plain.usage is not None
    assert near.usage[1] < plain.usage[1]


def test_a_budget_fitted_under_the_cap_rescues_a_proof_that_would_be_cut() -> None:
    """A generator whose reasoning runs past ``max_tokens``: without a budget it is cut with
    no proof; with a budget that leaves the visible proof its room, it ends with the proof."""
    long_thinker = RoleParams(lengths={**RoleParams().lengths, "generator": (200_000, 0.05)})
    lab = LabModel(policy.PROBLEMS[0], long_thinker, seed=1)
    cap = 100_000
    plain = lab(_request(GENERATOR_SYSTEM, "Problem.", cap))
    assert plain.finish_reason == "length" and "## Self-assessment" not in plain.text
    fitted = lab(_encoded(GENERATOR_SYSTEM, "Problem.", cap - 8192, max_tokens=cap))
    assert fitted.finish_reason == "stop" and "## Self-assessment" in fitted.text
    (proof,) = lab.proofs_in(fitted.text)
    assert fitted.usage is not None and fitted.usage[1] == cap - 8192 + proof.tokens


def test_a_minor_remark_fails_a_report_only_under_minor_blocks() -> None:
    """``acceptance.minor_blocks`` (DeepSeek-Math-V2's 0.5 for minor errors): a passing report
    with a minor finding is a fail; without it, a pass."""
    from solver.loop.policy import verification_outcome
    from solver.loop.state import CallState, RunState
    from solver.records import VerificationFacts
    from solver.roles.verifier import ProofFinding

    minor = ProofFinding(id="F1", location="Step 1", severity="minor", explanation="terse")
    call = CallState(
        call_id="L0.v0.verify.0",
        role="verifier",
        variant="stepwise",
        phase="solve",
        lineage="L0",
        version=0,
        target=None,
        evaluation=False,
        status="completed",
        parsed_ok=True,
        facts=VerificationFacts(verdict="pass", findings=(minor,)),
    )
    state = RunState(reviews=False)
    state.calls[call.call_id] = call
    assert verification_outcome(state, call, PolicyConfig(review=False)) == "pass"
    strict = PolicyConfig(review=False, minor_blocks=True)
    assert verification_outcome(state, call, strict) == "fail"
