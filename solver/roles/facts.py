"""What the policy needs of a role's output, as typed facts: a discriminated union, one model a
kind of result, copied into ``call.completed`` so that folding a journal never reads blobs.

On disk the facts are the plain object they always were (``{"verdict": ..., "findings": ...}``,
``{"score": ...}``, ...): no tag is written, the kind is told by the keys, so every journal
written before these models existed reads unchanged. A key that was absent when the facts were
made stays absent when they are written.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    SerializerFunctionWrapHandler,
    Tag,
    TypeAdapter,
    model_serializer,
)

Severity = Literal["critical", "major", "minor"]


class ProofFinding(BaseModel):
    """One defect a verifier reported in a proof."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    location: str
    severity: Severity
    explanation: str


FactsKind = Literal["none", "not_used", "proof", "verification", "review", "grade", "selection"]


class _Facts(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    KIND: ClassVar[FactsKind]

    @property
    def usable(self) -> bool:
        """Whether the output can be used as the role's result (counted as parsed)."""
        return True

    @model_serializer(mode="wrap")
    def _given_keys_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        return {key: value for key, value in dumped.items() if key in self.model_fields_set}


class NoFacts(_Facts):
    """A role whose output the policy does not read."""

    KIND: ClassVar[FactsKind] = "none"


class NotUsedFacts(_Facts):
    """The output was cut off or ended oddly: nothing of it is used."""

    KIND: ClassVar[FactsKind] = "not_used"
    not_used: str  # why, e.g. "finish reason length"


class ProofFacts(_Facts):
    """A generator's or reviser's attempt."""

    KIND: ClassVar[FactsKind] = "proof"
    has_proof: bool
    final_answer: str | None = None  # given only with a proof
    commentary: str | None = None  # a revision that talked about the revision: no proof


class VerificationFacts(_Facts):
    KIND: ClassVar[FactsKind] = "verification"
    verdict: Literal["pass", "fail"]
    findings: tuple[ProofFinding, ...]


class ReviewFacts(_Facts):
    """A review of one verification: the ids of its findings confirmed and rejected, and the
    severity each confirmed one stands at."""

    KIND: ClassVar[FactsKind] = "review"
    confirmed: list[str]
    rejected: list[str]
    severity: dict[str, str]


class GradeFacts(_Facts):
    KIND: ClassVar[FactsKind] = "grade"
    score: int | None  # None: no readable grade (never the conservative 0)


class SelectionFacts(_Facts):
    """The proofs the selector was shown, in order, and the one it chose (absent when its
    output named none of them)."""

    KIND: ClassVar[FactsKind] = "selection"
    shown: list[tuple[str, int]]
    choice: tuple[str, int] | None = None

    @property
    def usable(self) -> bool:
        return self.choice is not None


# Which keys tell which kind, in the order they are looked for.
_KIND_KEYS: tuple[tuple[str, FactsKind], ...] = (
    ("not_used", "not_used"),
    ("verdict", "verification"),
    ("confirmed", "review"),
    ("score", "grade"),
    ("shown", "selection"),
    ("has_proof", "proof"),
)


def _kind_of(value: Any) -> FactsKind:
    if isinstance(value, _Facts):
        return value.KIND
    if isinstance(value, dict):
        for key, kind in _KIND_KEYS:
            if key in value:
                return kind
    return "none"


Facts = Annotated[
    Annotated[NoFacts, Tag("none")]
    | Annotated[NotUsedFacts, Tag("not_used")]
    | Annotated[ProofFacts, Tag("proof")]
    | Annotated[VerificationFacts, Tag("verification")]
    | Annotated[ReviewFacts, Tag("review")]
    | Annotated[GradeFacts, Tag("grade")]
    | Annotated[SelectionFacts, Tag("selection")],
    Discriminator(_kind_of),
]
FACTS_ADAPTER: TypeAdapter[Facts] = TypeAdapter(Facts)
