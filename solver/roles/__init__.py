"""The six roles: what each may see, its templates, how its output is parsed.

Each role module declares ``Inputs`` (a frozen pydantic model, ``extra="forbid"``, every field
tagged with an input kind), its templates under ``prompts/<role>/`` (one system and one user
template per variant), ``parse(text) -> Output`` (never raises) and ``CONSERVATIVE``, the outcome
taken when output does not parse. This package imports only its own modules, pydantic, jinja2
and the standard library; it knows nothing of transport, storage or the loop.

Policy keys: the six role names, plus ``generator:improve`` (the generator's
self-improvement turn) and ``reviser:recombine`` (a revision from a pool of proofs of
different lineages), plus ``grader:evaluation``, ``grader:rejudge`` and
``grader:reconcile`` for grading in evaluation mode (after the solve phase; they may also see the
reference solution, the grading guidelines and a drafted marking scheme, and a re-judging
grader the graders' judgments), and ``rubric_writer``, which drafts that scheme in evaluation
mode from the reference solution.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from pydantic import BaseModel

from solver.roles import generator, grader, reviewer, reviser, rubric_writer, selector, verifier
from solver.roles.base import (
    FORBIDDEN_EVERYWHERE,
    INPUT_KINDS,
    REFERENCE_KINDS,
    InputKind,
    Kind,
    RoleInputs,
    RoleOutput,
    input_kinds,
    label_index,
    proof_label,
)
from solver.roles.facts import (
    FACTS_ADAPTER,
    Facts,
    GradeFacts,
    NoFacts,
    NotUsedFacts,
    ProofFacts,
    ReviewFacts,
    SelectionFacts,
    VerificationFacts,
)
from solver.roles.proof import ProofParts, extract_proof, strip_thinking
from solver.roles.reviser import UNREVIEWED
from solver.roles.templates import (
    environment_from,
    referenced_templates,
    render_template,
    template_digests,
    template_names,
    template_source,
)
from solver.roles.verifier import CHECK as VERIFIER_CHECK
from solver.roles.verifier import ProofFinding

__all__ = [
    "FACTS_ADAPTER",
    "FORBIDDEN_EVERYWHERE",
    "INPUT_KINDS",
    "ISOLATION_POLICY",
    "POLICY_KEYS",
    "REFERENCE_KINDS",
    "ROLE_NAMES",
    "UNREVIEWED",
    "VERIFIER_CHECK",
    "Facts",
    "GradeFacts",
    "InputKind",
    "Kind",
    "NoFacts",
    "NotUsedFacts",
    "ProofFacts",
    "ProofFinding",
    "ProofParts",
    "ReviewFacts",
    "RoleInputs",
    "RoleOutput",
    "RoleSpec",
    "SelectionFacts",
    "VerificationFacts",
    "check_isolation",
    "environment_from",
    "extract_proof",
    "generator",
    "get_role",
    "grader",
    "input_kinds",
    "isolation_policy_record",
    "label_index",
    "message_role",
    "proof_label",
    "render",
    "render_template",
    "reviewer",
    "reviser",
    "rubric_writer",
    "selector",
    "strip_thinking",
    "template_digests",
    "template_names",
    "template_source",
    "templates_for",
    "verifier",
]

ROLE_NAMES: tuple[str, ...] = (
    "generator",
    "verifier",
    "reviewer",
    "reviser",
    "grader",
    "selector",
)


@dataclass(frozen=True, slots=True)
class RoleSpec:
    """Everything the engine needs to call one role (or one grader mode)."""

    name: str
    inputs_model: type[RoleInputs]
    output_model: type[RoleOutput]
    variants: tuple[str, ...]
    templates: Mapping[str, tuple[str, ...]]  # variant -> its templates, one per message
    parse: Callable[[str], RoleOutput]
    conservative: RoleOutput

    @property
    def allowed_kinds(self) -> frozenset[str]:
        return frozenset(self.inputs_model.KINDS.values())


def _spec(
    name: str,
    inputs: type[RoleInputs],
    output: type[RoleOutput],
    templates: Mapping[str, tuple[str, ...]],
    parse: Callable[[str], RoleOutput],
    conservative: RoleOutput,
) -> RoleSpec:
    return RoleSpec(
        name=name,
        inputs_model=inputs,
        output_model=output,
        variants=tuple(templates),
        templates=MappingProxyType(dict(templates)),
        parse=parse,
        conservative=conservative,
    )


_SPECS: dict[str, RoleSpec] = {
    spec.name: spec
    for spec in (
        _spec(
            "generator",
            generator.Inputs,
            generator.Output,
            generator.TEMPLATES,
            generator.parse,
            generator.CONSERVATIVE,
        ),
        _spec(
            generator.IMPROVE,
            generator.ImproveInputs,
            generator.Output,
            generator.IMPROVE_TEMPLATES,
            generator.parse,
            generator.CONSERVATIVE,
        ),
        _spec(
            "verifier",
            verifier.Inputs,
            verifier.Output,
            verifier.TEMPLATES,
            verifier.parse,
            verifier.CONSERVATIVE,
        ),
        _spec(
            verifier.CHECK,
            verifier.Inputs,
            verifier.Output,
            verifier.TEMPLATES,
            verifier.parse,
            verifier.CONSERVATIVE,
        ),
        _spec(
            "reviewer",
            reviewer.Inputs,
            reviewer.Output,
            reviewer.TEMPLATES,
            reviewer.parse,
            reviewer.CONSERVATIVE,
        ),
        _spec(
            "reviser",
            reviser.Inputs,
            reviser.Output,
            reviser.TEMPLATES,
            reviser.parse,
            reviser.CONSERVATIVE,
        ),
        _spec(
            reviser.RECOMBINE,
            reviser.RecombineInputs,
            reviser.Output,
            reviser.RECOMBINE_TEMPLATES,
            reviser.parse,
            reviser.CONSERVATIVE,
        ),
        _spec(
            "grader",
            grader.Inputs,
            grader.Output,
            grader.TEMPLATES,
            grader.parse,
            grader.CONSERVATIVE,
        ),
        _spec(
            grader.EVALUATION,
            grader.EvaluationInputs,
            grader.Output,
            grader.EVALUATION_TEMPLATES,
            grader.parse,
            grader.CONSERVATIVE,
        ),
        _spec(
            grader.REJUDGE,
            grader.RejudgeInputs,
            grader.Output,
            grader.REJUDGE_TEMPLATES,
            grader.parse,
            grader.CONSERVATIVE,
        ),
        _spec(
            rubric_writer.NAME,
            rubric_writer.Inputs,
            rubric_writer.Output,
            rubric_writer.TEMPLATES,
            rubric_writer.parse,
            rubric_writer.CONSERVATIVE,
        ),
        _spec(
            grader.RECONCILE,
            grader.ReconcileInputs,
            grader.Output,
            grader.RECONCILE_TEMPLATES,
            grader.parse,
            grader.CONSERVATIVE,
        ),
        _spec(
            "selector",
            selector.Inputs,
            selector.Output,
            selector.TEMPLATES,
            selector.parse,
            selector.CONSERVATIVE,
        ),
    )
}

POLICY_KEYS: tuple[str, ...] = tuple(_SPECS)

# Role (policy key) -> the input kinds its calls may carry. Derived from the Inputs models, so
# the policy and what can be built are one and the same thing; the manifest records it.
ISOLATION_POLICY: dict[str, frozenset[str]] = {
    key: spec.allowed_kinds for key, spec in _SPECS.items()
}

if any(FORBIDDEN_EVERYWHERE & kinds for kinds in ISOLATION_POLICY.values()):
    raise RuntimeError("a role's Inputs carries a kind that no role may see")


def isolation_policy_record() -> dict[str, list[str]]:
    """:data:`ISOLATION_POLICY` as sorted JSON-ready lists (for the run manifest)."""
    return {key: sorted(kinds) for key, kinds in sorted(ISOLATION_POLICY.items())}


def get_role(name: str) -> RoleSpec:
    """The spec of a role or grader mode; KeyError names the valid keys."""
    try:
        return _SPECS[name]
    except KeyError:
        raise KeyError(f"unknown role {name!r}; known: {', '.join(POLICY_KEYS)}") from None


def templates_for(role: str, variant: str) -> tuple[str, ...]:
    """Every template a call of ``role``/``variant`` renders, includes resolved, sorted."""
    found: set[str] = set()
    for name in _templates(get_role(role), variant):
        found.update(referenced_templates(name))
    return tuple(sorted(found))


def message_role(template: str) -> str:
    """The message a turn template renders: ``...system.j2`` the system message,
    ``...assistant.j2`` an assistant turn (a multi-turn call's earlier answer), else a user's."""
    if template.endswith("system.j2"):
        return "system"
    return "assistant" if template.endswith("assistant.j2") else "user"


def _templates(spec: RoleSpec, variant: str) -> tuple[str, ...]:
    try:
        return spec.templates[variant]
    except KeyError:
        raise KeyError(
            f"role {spec.name!r} has no variant {variant!r}; known: {', '.join(spec.variants)}"
        ) from None


def check_isolation(role: str, inputs: BaseModel) -> None:
    """Raise TypeError unless ``inputs`` is exactly the role's Inputs model and every kind it
    carries is allowed for the role."""
    spec = get_role(role)
    if type(inputs) is not spec.inputs_model:
        raise TypeError(
            f"role {role!r} takes {spec.inputs_model.__module__}.{spec.inputs_model.__name__},"
            f" not {type(inputs).__module__}.{type(inputs).__name__}"
        )
    carried = set(input_kinds(inputs).values())
    forbidden = carried - ISOLATION_POLICY[role]
    if forbidden:
        raise TypeError(f"role {role!r} may not see {', '.join(sorted(forbidden))}")


def render(role: str, variant: str, inputs: BaseModel) -> tuple[tuple[str, str], ...]:
    """The messages of one call: ``(("system", ...), ("user", ...))`` (a multi-turn variant
    goes on with its later turns, in order), built only from
    ``inputs``. Deterministic: the same inputs give the same bytes."""
    check_isolation(role, inputs)
    context = {name: getattr(inputs, name) for name in type(inputs).model_fields}
    return tuple(
        (message_role(name), render_template(name, context))
        for name in _templates(get_role(role), variant)
    )
