"""Rendering: StrictUndefined, determinism, isolation by construction, template digests."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import jinja2
import pydantic
import pytest

from solver import roles
from solver.roles import generator, grader, reviewer, reviser, rubric_writer, selector, verifier
from solver.roles.templates import render_template

PROBLEM = "Prove that the sum of two odd integers is even."
PROOF = "## Proof\n\nWrite the integers as $2a+1$ and $2b+1$; their sum is $2(a+b+1)$."


def sample_inputs(key: str) -> pydantic.BaseModel:
    samples: dict[str, pydantic.BaseModel] = {
        "generator": generator.Inputs(problem_statement=PROBLEM),
        "verifier": verifier.Inputs(problem_statement=PROBLEM, proof_text=PROOF),
        "verifier:check": verifier.Inputs(problem_statement=PROBLEM, proof_text=PROOF),
        "reviewer": reviewer.Inputs(
            problem_statement=PROBLEM, proof_text=PROOF, verification_report="REPORT-TEXT"
        ),
        "reviser": reviser.Inputs(
            problem_statement=PROBLEM, proof_text=PROOF, confirmed_findings="FINDINGS-TEXT"
        ),
        "grader": grader.Inputs(problem_statement=PROBLEM, proof_text=PROOF),
        "grader:evaluation": grader.EvaluationInputs(
            problem_statement=PROBLEM,
            proof_text=PROOF,
            reference_solution="REFERENCE-TEXT",
            grading_guidelines="GUIDELINES-TEXT",
            marking_scheme="SCHEME-TEXT",
        ),
        "grader:rejudge": grader.RejudgeInputs(
            problem_statement=PROBLEM,
            proof_text=PROOF,
            reference_solution="REFERENCE-TEXT",
            marking_scheme="SCHEME-TEXT",
            own_judgment="MY-JUDGMENT",
            other_judgments=("JUDGMENT-ONE", "JUDGMENT-TWO"),
        ),
        "rubric_writer": rubric_writer.Inputs(
            problem_statement=PROBLEM, reference_solution="REFERENCE-TEXT"
        ),
        "grader:reconcile": grader.ReconcileInputs(
            problem_statement=PROBLEM,
            proof_text=PROOF,
            reference_solution="REFERENCE-TEXT",
            grader_judgments=("JUDGMENT-ONE", "JUDGMENT-TWO"),
        ),
        "selector": selector.Inputs(
            problem_statement=PROBLEM, anonymised_proofs=("FIRST-PROOF", "SECOND-PROOF")
        ),
        "generator:improve": generator.ImproveInputs(problem_statement=PROBLEM, proof_text=PROOF),
        "reviser:recombine": reviser.RecombineInputs(
            problem_statement=PROBLEM, pooled_proofs=("POOLED-ONE", "POOLED-TWO", "POOLED-THREE")
        ),
    }
    return samples[key]


CALLS = [(key, variant) for key in roles.POLICY_KEYS for variant in roles.get_role(key).variants]


def test_the_six_roles_and_the_grader_modes() -> None:
    assert roles.ROLE_NAMES == (
        "generator",
        "verifier",
        "reviewer",
        "reviser",
        "grader",
        "selector",
    )
    assert set(roles.POLICY_KEYS) == {
        *roles.ROLE_NAMES,
        "grader:evaluation",
        "grader:rejudge",
        "grader:reconcile",
        "rubric_writer",
        "generator:improve",
        "reviser:recombine",
        "verifier:check",
    }
    # a later check by another family is a verification in every respect but its key
    check, verify = roles.get_role("verifier:check"), roles.get_role("verifier")
    assert (check.inputs_model, check.templates) == (verify.inputs_model, verify.templates)
    assert roles.get_role("generator").variants == ("direct", "explore-cases", "invariant-first")
    assert len(roles.get_role("verifier").variants) >= 2
    with pytest.raises(KeyError, match="unknown role"):
        roles.get_role("oracle")


@pytest.mark.parametrize(("key", "variant"), CALLS)
def test_every_variant_renders_a_system_and_a_user_message(key: str, variant: str) -> None:
    inputs = sample_inputs(key)
    messages = roles.render(key, variant, inputs)
    turns = ["system", "user", "assistant", "user"] if key == "generator:improve" else None
    assert [role for role, _ in messages] == (turns or ["system", "user"])
    system = messages[0][1]
    user = "".join(content for _, content in messages[1:])
    assert system.strip() and all(content.strip() for _, content in messages)
    assert PROBLEM in messages[1][1]
    # every input value reaches the user message, verbatim
    for name in type(inputs).model_fields:
        value = getattr(inputs, name)
        for part in value if isinstance(value, tuple) else (value,):
            if part:
                assert part in user, (key, name)


@pytest.mark.parametrize(("key", "variant"), CALLS)
def test_rendering_is_deterministic(key: str, variant: str) -> None:
    first = roles.render(key, variant, sample_inputs(key))
    second = roles.render(key, variant, sample_inputs(key))
    assert first == second
    assert [c.encode() for _, c in first] == [c.encode() for _, c in second]


@pytest.mark.parametrize(("key", "variant"), CALLS)
def test_a_missing_input_raises(key: str, variant: str) -> None:
    """StrictUndefined: rendering a template without one of its inputs is an error."""
    spec = roles.get_role(key)
    turns = spec.templates[variant][1:]
    inputs = sample_inputs(key)
    context = {name: getattr(inputs, name) for name in type(inputs).model_fields}
    required = [n for n, f in type(inputs).model_fields.items() if f.is_required()]
    for name in required:
        partial = {k: v for k, v in context.items() if k != name}
        with pytest.raises(jinja2.UndefinedError):
            for turn in turns:
                render_template(turn, partial)


def test_variants_differ_and_use_no_problem_specific_text() -> None:
    inputs = sample_inputs("generator")
    systems = {roles.render("generator", v, inputs)[0][1] for v in generator.VARIANTS}
    assert len(systems) == len(generator.VARIANTS)
    # The system messages carry instructions only: no input reaches them.
    for key, variant in CALLS:
        system = roles.render(key, variant, sample_inputs(key))[0][1]
        assert PROBLEM not in system and "REFERENCE-TEXT" not in system


def test_inputs_refuse_fields_outside_the_policy() -> None:
    with pytest.raises(pydantic.ValidationError):
        verifier.Inputs(
            problem_statement=PROBLEM,
            proof_text=PROOF,
            reference_solution="leak",  # type: ignore[call-arg]
        )
    with pytest.raises(pydantic.ValidationError):
        grader.Inputs(
            problem_statement=PROBLEM,
            proof_text=PROOF,
            grading_guidelines="leak",  # type: ignore[call-arg]
        )
    with pytest.raises(pydantic.ValidationError):
        generator.Inputs(
            problem_statement=PROBLEM,
            generator_reasoning="thoughts",  # type: ignore[call-arg]
        )
    with pytest.raises(pydantic.ValidationError):
        verifier.Inputs(problem_statement=PROBLEM, proof_text="")
    with pytest.raises(pydantic.ValidationError):
        grader.EvaluationInputs(problem_statement=PROBLEM, proof_text=PROOF)
    inputs = verifier.Inputs(problem_statement=PROBLEM, proof_text=PROOF)
    with pytest.raises(pydantic.ValidationError):
        inputs.proof_text = "changed"  # type: ignore[misc]


def test_inputs_round_trip_through_json_and_plain_data() -> None:
    """The engine stores inputs as JSON; the audit rebuilds them from it (lists for tuples)."""
    for key in roles.POLICY_KEYS:
        inputs = sample_inputs(key)
        model = type(inputs)
        assert model.model_validate_json(inputs.model_dump_json()) == inputs
        assert model.model_validate(inputs.model_dump(mode="json")) == inputs
    with pytest.raises(pydantic.ValidationError):
        verifier.Inputs.model_validate({"problem_statement": 3, "proof_text": PROOF})


def test_render_refuses_another_roles_inputs() -> None:
    with pytest.raises(TypeError, match="takes"):
        roles.render("verifier", "stepwise", sample_inputs("reviewer"))
    with pytest.raises(TypeError, match="takes"):
        roles.render("grader", "standard", sample_inputs("grader:evaluation"))
    with pytest.raises(KeyError, match="no variant"):
        roles.render("verifier", "direct", sample_inputs("verifier"))


def test_isolation_policy_table() -> None:
    policy = roles.ISOLATION_POLICY
    assert policy["generator"] == {"problem_statement"}
    assert policy["verifier"] == {"problem_statement", "proof_text"}
    assert policy["reviewer"] == {"problem_statement", "proof_text", "verification_report"}
    assert policy["reviser"] == {"problem_statement", "proof_text", "confirmed_findings"}
    assert policy["grader"] == {"problem_statement", "proof_text"}
    assert policy["grader:evaluation"] == {
        "problem_statement",
        "proof_text",
        "reference_solution",
        "grading_guidelines",
        "marking_scheme",
    }
    assert "grader_judgments" in policy["grader:reconcile"]
    assert "grader_judgments" in policy["grader:rejudge"]
    # The rubric writer sees the reference solution and nothing any solver produced.
    assert policy["rubric_writer"] == {"problem_statement", "reference_solution"}
    assert policy["selector"] == {"problem_statement", "anonymised_proofs"}
    assert all("generator_reasoning" not in kinds for kinds in policy.values())
    for key in roles.POLICY_KEYS:
        assert set(roles.input_kinds(sample_inputs(key)).values()) <= policy[key]
    record = roles.isolation_policy_record()
    assert record["verifier"] == ["problem_statement", "proof_text"]


def test_input_kinds_name_every_field() -> None:
    kinds = roles.input_kinds(sample_inputs("reviewer"))
    assert kinds == {
        "problem_statement": "problem_statement",
        "proof_text": "proof_text",
        "verification_report": "verification_report",
    }

    class Plain(pydantic.BaseModel):
        problem_statement: str

    with pytest.raises(TypeError):
        roles.input_kinds(Plain(problem_statement=PROBLEM))


def test_a_field_without_a_kind_is_refused_at_class_creation() -> None:
    with pytest.raises(TypeError, match="Kind"):

        class Careless(roles.RoleInputs):
            problem_statement: str


def test_template_digests_match_the_bytes() -> None:
    digests = roles.template_digests()
    assert "generator/direct.system.j2" in digests
    for key, variant in CALLS:
        for name in roles.templates_for(key, variant):
            source = roles.template_source(name)
            assert digests[name] == "sha256:" + hashlib.sha256(source).hexdigest()
    assert "generator/_contract.j2" in roles.templates_for("generator", "direct")
    with pytest.raises(jinja2.TemplateNotFound):
        roles.template_source("../roles/base.py")


def test_selector_labels() -> None:
    labels = [roles.proof_label(i) for i in (0, 1, 25, 26, 27, 701)]
    assert labels == ["A", "B", "Z", "AA", "AB", "ZZ"]
    assert [roles.label_index(label) for label in labels] == [0, 1, 25, 26, 27, 701]
    assert roles.label_index("proof") is None
    assert roles.label_index("") is None


def test_roles_import_nothing_else_of_the_project() -> None:
    """roles/ sees no transport, storage or loop: importing it loads no solver or serve module."""
    code = (
        "import sys\nfrom solver import roles\n"
        "roles.render('generator', 'direct', roles.get_role('generator').inputs_model("
        "problem_statement='p'))\n"
        "bad = sorted(m for m in sys.modules\n"
        "          if m.startswith('solver.') and not m.startswith('solver.roles'))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == ""
