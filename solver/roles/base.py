"""Shared building blocks of the roles: input kinds, the inputs base model, output base model.

Every field of a role's ``Inputs`` carries an input *kind* from a closed set, so the engine can
record and the audit can check, call by call, what kind of material reached which role.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict

InputKind = Literal[
    "problem_statement",
    "proof_text",
    "verification_report",
    "confirmed_findings",
    "reference_solution",
    "grading_guidelines",
    "anonymised_proofs",
    "pooled_proofs",
    "grader_judgments",
    "marking_scheme",
    "generator_reasoning",
]

INPUT_KINDS: frozenset[str] = frozenset(get_args(InputKind))

# A kind that exists so it can be named in records and refused everywhere: no role may see it.
FORBIDDEN_EVERYWHERE: frozenset[str] = frozenset({"generator_reasoning"})

# The organisers' material (and the scheme drafted from it): optional fields, shown to a role
# that declares them only when the problem has them, and never before the solve phase ends.
REFERENCE_KINDS: frozenset[str] = frozenset(
    {"reference_solution", "grading_guidelines", "marking_scheme"}
)


@dataclass(frozen=True, slots=True)
class Kind:
    """Field metadata naming the input kind: ``Annotated[str, Kind("proof_text")]``."""

    name: InputKind

    def __post_init__(self) -> None:
        if self.name not in INPUT_KINDS:
            raise ValueError(f"unknown input kind {self.name!r}")


class RoleInputs(BaseModel):
    """Base of every role's ``Inputs``: frozen, no extra fields, every field has a kind.

    ``extra="forbid"`` is what makes isolation structural: an Inputs model for a verifier cannot
    be built with, say, a ``reference_solution`` field, because the model has no such field.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    KINDS: ClassVar[dict[str, str]] = {}

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        kinds: dict[str, str] = {}
        for name, info in cls.model_fields.items():
            found = [m.name for m in info.metadata if isinstance(m, Kind)]
            if len(found) != 1:
                raise TypeError(f"{cls.__qualname__}.{name} must carry exactly one Kind(...)")
            kinds[name] = found[0]
        cls.KINDS = kinds


def input_kinds(inputs: BaseModel) -> dict[str, str]:
    """Field name -> input kind of a role's inputs (what the audit checks per call)."""
    if not isinstance(inputs, RoleInputs):
        raise TypeError(f"{type(inputs).__name__} is not a role's Inputs model")
    return dict(type(inputs).KINDS)


class RoleOutput(BaseModel):
    """Base of every parsed output. ``parsed`` is False when the text did not follow the role's
    output contract and the role's conservative outcome was taken instead; ``parse_note`` says
    why, in one line, for the journal."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    parsed: bool
    parse_note: str = ""


def proof_label(index: int) -> str:
    """0 -> "A", 25 -> "Z", 26 -> "AA": the labels under which the selector sees proofs."""
    if index < 0:
        raise ValueError("a proof label index is never negative")
    label = ""
    number = index + 1
    while number > 0:
        number, rest = divmod(number - 1, 26)
        label = chr(ord("A") + rest) + label
    return label


def label_index(label: str) -> int | None:
    """Inverse of :func:`proof_label`; None for anything that is not a label."""
    text = label.strip().upper()
    if not text or not text.isascii() or not text.isalpha() or len(text) > 3:
        return None
    number = 0
    for char in text:
        number = number * 26 + (ord(char) - ord("A") + 1)
    return number - 1
