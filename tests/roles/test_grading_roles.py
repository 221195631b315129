"""The grading roles' contracts: checkpoints in rubric mode, the 7/6/1/0 scale, marking schemes."""

from __future__ import annotations

import json

from solver import roles
from solver.roles import grader, rubric_writer

PROBLEM = "Prove that the sum of two odd integers is even."


def _block(payload: object) -> str:
    return f"Assessment.\n\n```json\n{json.dumps(payload)}\n```"


def test_rubric_grader_accounts_for_each_checkpoint() -> None:
    out = grader.parse(
        _block(
            {
                "checkpoints": [
                    {"item": "parity of odd numbers", "max": 3, "awarded": 3, "reason": "ok"},
                    {"item": "the sum", "max": 4, "awarded": 1, "reason": "gap"},
                ],
                "score": 4,
                "justification": "gap in step 2",
            }
        )
    )
    assert out.parsed and out.score == 4
    assert [(c.item, c.awarded, c.max) for c in out.checkpoints] == [
        ("parity of odd numbers", 3, 3),
        ("the sum", 1, 4),
    ]
    assert "- the sum: 1/4" in grader.format_judgment(out)


def test_a_score_above_its_checkpoints_is_lowered_to_them() -> None:
    out = grader.parse(_block({"checkpoints": [{"item": "a", "max": 7, "awarded": 2}], "score": 6}))
    assert out.score == 2
    assert "above its checkpoints" in out.parse_note


def test_malformed_checkpoints_leave_the_score() -> None:
    out = grader.parse(_block({"checkpoints": [{"item": "a", "max": 1, "awarded": 5}], "score": 3}))
    assert (out.parsed, out.score, out.checkpoints) == (True, 3, ())
    assert "malformed" in out.parse_note


def test_proofbench_scale_lowers_to_its_grades() -> None:
    assert [grader.on_scale(s) for s in range(8)] == [0, 1, 1, 1, 1, 1, 6, 7]


def test_rubric_mode_prompt_asks_for_checkpoints_and_not_for_sparing_scores() -> None:
    with_scheme = grader.EvaluationInputs(
        problem_statement=PROBLEM, proof_text="p", marking_scheme="1. (7 points) all"
    )
    system, user = (text for _, text in roles.render("grader:evaluation", "rubric", with_scheme))
    assert '"checkpoints"' in system and "sparingly" not in system
    assert "# Marking scheme" in user
    only_reference = grader.EvaluationInputs(
        problem_statement=PROBLEM, proof_text="p", reference_solution="ref"
    )
    system = roles.render("grader:evaluation", "rubric", only_reference)[0][1]
    assert '"checkpoints"' not in system
    for key, variant in (("grader", "proofbench"), ("grader:evaluation", "proofbench")):
        inputs = (
            with_scheme
            if key != "grader"
            else grader.Inputs(problem_statement=PROBLEM, proof_text="p")
        )
        system = roles.render(key, variant, inputs)[0][1]
        assert "7, 6, 1 or 0" in system


def test_rubric_writer_scheme_must_add_up_to_seven() -> None:
    good = rubric_writer.parse(
        _block(
            {
                "checkpoints": [
                    {"item": "odd numbers are 2k+1", "points": 2, "partial": ""},
                    {"item": "the sum is 2(a+b+1)", "points": 5, "partial": "the form alone: 2"},
                ]
            }
        )
    )
    assert good.parsed and [c.points for c in good.checkpoints] == [2, 5]
    text = rubric_writer.format_scheme(good)
    assert text.splitlines()[0] == "1. (2 points) odd numbers are 2k+1"
    assert "   Partial credit: the form alone: 2" in text
    short = rubric_writer.parse(_block({"checkpoints": [{"item": "x", "points": 3}]}))
    assert not short.parsed and "add up to 3" in short.parse_note
    assert not rubric_writer.parse("no JSON here").parsed
    zero = rubric_writer.parse(_block({"checkpoints": [{"item": "x", "points": 0}]}))
    assert not zero.parsed


def test_proofbench_points_tag_is_read() -> None:
    out = grader.parse("The core is sound; one slip.\n<points>6 out of 7</points>")
    assert (out.parsed, out.score) == (True, 6)
