"""Reviser: repair one candidate using the confirmed findings only.

Sees the problem, the parent proof text and the confirmed findings (quote, severity,
explanation; no verifier identity, no counts, no rejected findings); in a run without
reviews, the findings of the failing reports as reported (variant ``unreviewed``). Output
contract: the generator's sections (``## Proof``, ``## Final answer``, ``## Self-assessment``) plus
``## Response to findings`` saying, per finding, fixed or disputed and why.

Its recombining variant (policy key ``reviser:recombine``) sees two to four of the best
proofs of different lineages, each with its own confirmed findings (input kind
``pooled_proofs``, one text per proof made by :func:`format_pool_entry`), and writes one new
proof from them; same output contract, without the response to findings.

Whatever the variant, the proof must stand alone: :func:`commentary` finds talk about the
revision, which makes the output unusable.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated

from pydantic import Field

from solver.roles import generator
from solver.roles.base import Kind, RoleInputs
from solver.roles.proof import parse_proof_output
from solver.roles.verifier import ProofFinding, finding_keys

NAME = "reviser"
# "unreviewed": a run without reviews (``acceptance.review`` false) shows the reviser its
# failing reports' findings as the verifier wrote them, and the prompt says nobody checked them.
UNREVIEWED = "unreviewed"
VARIANTS: tuple[str, ...] = ("standard", UNREVIEWED)
TEMPLATES: dict[str, tuple[str, ...]] = {
    "standard": ("reviser/system.j2", "reviser/user.j2"),
    UNREVIEWED: ("reviser/unreviewed.system.j2", "reviser/unreviewed.user.j2"),
}
RECOMBINE = "reviser:recombine"
RECOMBINE_TEMPLATES: dict[str, tuple[str, ...]] = {
    "standard": ("reviser/recombine.system.j2", "reviser/recombine.user.j2")
}
POOL_SIZES = (2, 4)  # a recombination sees at least two proofs and at most four


class Inputs(RoleInputs):
    problem_statement: Annotated[str, Kind("problem_statement"), Field(min_length=1)]
    proof_text: Annotated[str, Kind("proof_text"), Field(min_length=1)]
    confirmed_findings: Annotated[str, Kind("confirmed_findings"), Field(min_length=1)]


class RecombineInputs(RoleInputs):
    problem_statement: Annotated[str, Kind("problem_statement"), Field(min_length=1)]
    pooled_proofs: Annotated[
        tuple[str, ...],
        Kind("pooled_proofs"),
        Field(min_length=POOL_SIZES[0], max_length=POOL_SIZES[1], strict=False),
    ]


class Output(generator.Output):
    """The generator's output plus the reply to each finding."""

    responses: str


CONSERVATIVE = Output(
    parsed=False,
    parse_note="no proof text",
    proof="",
    body="",
    final_answer=None,
    self_assessment="",
    responses="",
    claimed_status="unknown",
)


def parse(text: str) -> Output:
    """Never raises. A reply without proof text is :data:`CONSERVATIVE` (the revision
    failed; the lineage keeps its parent)."""
    return parse_proof_output(text, Output, CONSERVATIVE)


_RANK = {"minor": 0, "major": 1, "critical": 2}

# Talk about the revision rather than mathematics: it would show verifiers and the selector
# that the proof was revised, and on what (they judge the proof as a contestant's).
_COMMENTARY = re.compile(
    r"\bfindings?\s+C\d+\b"
    r"|\b(?:fix(?:es|ed|ing)?|address(?:es|ed|ing)?|resolv(?:e|es|ed|ing))\s+"
    r"(?:C\d+\b|the\s+(?:findings?|issues?\s+raised|reviewers?))"
    r"|\b(?:reviewers?|verifiers?)\b"
    r"|\b(?:previous|earlier|original|prior)\s+(?:version|proof|draft|attempt)\b"
    r"|\bthis\s+revision\b|\brevised\s+(?:proof|version|argument)\b"
    # the self-improvement turn and the recombiner talk about their sources this way
    r"|\b(?:my|our)\s+(?:first|earlier|previous|original)\s+(?:answer|solution|attempt|proof)\b"
    r"|\b(?:earlier|previous)\s+(?:answer|solution)\b"
    r"|\b(?:[Cc]andidates?|[Aa]ttempts?)\s+(?-i:[A-D])\b|\b(?:proofs?|candidates?)\s+(?:shown\s+)?above\b"
    r"|\b(?:the|these)\s+(?:given|pooled|other)\s+(?:proofs|candidates)\b",
    re.IGNORECASE,
)


def commentary(proof: str) -> str | None:
    """The first passage of ``proof`` (the text other roles see: proof and final answer)
    that talks about the revision (findings, reviewers, earlier versions or answers, the
    candidates a recombination was shown), or None when the proof stands alone. Such an
    output is unusable (recorded as giving no proof), so no verifier or selector sees it."""
    match = _COMMENTARY.search(proof)
    return match.group(0) if match else None


def merge_duplicates(findings: Sequence[ProofFinding]) -> list[ProofFinding]:
    """One finding per flaw: findings sharing a ``verifier.finding_keys`` key (two verifiers
    wording one flaw differently), or alike in every field, are merged into the first, at the
    most severe severity any of them has. Order of first appearance is kept."""
    merged: list[ProofFinding] = []
    keys: list[set[str]] = []
    for finding in findings:
        own = finding_keys(finding.location, finding.explanation)
        same = (finding.location.strip(), finding.explanation.strip())
        for index, kept in enumerate(merged):
            if own & keys[index] or same == (kept.location.strip(), kept.explanation.strip()):
                if _RANK[finding.severity] > _RANK[kept.severity]:
                    merged[index] = kept.model_copy(update={"severity": finding.severity})
                keys[index] |= own
                break
        else:
            merged.append(finding)
            keys.append(own)
    return merged


def format_findings(findings: Sequence[ProofFinding]) -> str:
    """Confirmed findings as the reviser is shown them: renumbered C1, C2, ... (so no verifier
    identity or report structure shows through), duplicates merged (``merge_duplicates``)."""
    blocks = [
        f"### Finding C{number} (severity: {finding.severity})\n"
        f"Location: {finding.location or '(not given)'}\n"
        f"Explanation: {finding.explanation or '(not given)'}"
        for number, finding in enumerate(merge_duplicates(findings), start=1)
    ]
    return "\n\n".join(blocks)


def format_pool_entry(proof_text: str, findings: str) -> str:
    """One proof of a recombination's pool as the recombiner is shown it: the proof, then its
    confirmed findings (``format_findings``), or a line saying none were confirmed."""
    shown = findings.strip() or "(no finding was confirmed)"
    return f"{proof_text.strip()}\n\n### Confirmed findings on this proof\n\n{shown}"
