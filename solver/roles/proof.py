"""Splitting a generator's (or reviser's) output into the parts other roles may see.

The generator template asks for three Markdown sections, in this order::

    ## Proof
    ## Final answer
    ## Self-assessment

(the reviser adds ``## Response to findings``). :func:`extract_proof` keeps the proof and the
final answer and drops everything else: any thinking (``<think>...</think>``, also unclosed), any
prose before the proof, the self-assessment and the response to findings. What it returns as
``proof`` is exactly what verifiers, reviewers, the reviser, graders and the selector are shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from solver.roles.facts import ProofFacts

_Out = TypeVar("_Out", bound=BaseModel)

Section = Literal["proof", "final_answer", "self_assessment", "responses", "other"]

_THINK_PAIR = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)

# A Markdown heading (#, ##, ###) or a whole line in bold, possibly ending in a colon.
_HEADING = re.compile(
    r"^[ \t]{0,3}(?:#{1,3}[ \t]+(?P<hash>[^\n]{1,120}?)[ \t#]*"
    r"|\*\*(?P<bold>[^*\n]{1,80})\*\*[ \t]*:?[ \t]*)$",
    re.MULTILINE,
)

_TITLES: tuple[tuple[Section, re.Pattern[str]], ...] = (
    ("self_assessment", re.compile(r"^(self[- ]?(assessment|evaluation|check|review)|confidence)")),
    ("responses", re.compile(r"^(responses?|reply|replies)( to (the )?(confirmed )?findings?)?$")),
    ("final_answer", re.compile(r"^(final )?answer$")),
    ("proof", re.compile(r"^((complete |full |detailed |revised )?(proof|solution))$")),
)


@dataclass(frozen=True, slots=True)
class ProofParts:
    """``proof``: the text other roles see (proof and final answer, canonical headings).
    ``body``: the proof section alone. ``self_assessment`` is kept for the record only."""

    proof: str
    body: str
    self_assessment: str
    final_answer: str | None
    responses: str
    followed_contract: bool

    def facts(self) -> ProofFacts:
        """An attempt's facts: whether it holds proof text, and its final answer if so."""
        if not self.proof.strip():
            return ProofFacts(has_proof=False)
        return ProofFacts(has_proof=True, final_answer=self.final_answer)


def strip_thinking(text: str) -> str:
    """Remove reasoning the model put in its visible text.

    Closed ``<think>...</think>`` blocks go; a stray closing tag means everything before it was
    thinking (servers that strip the opening tag); a stray opening tag means everything after it
    is thinking (a response cut off mid-thought).
    """
    text = _THINK_PAIR.sub("", text)
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opened = _THINK_OPEN.search(text)
    if opened:
        text = text[: opened.start()]
    return text


def _classify(title: str) -> Section:
    words = re.sub(r"[^a-z \-]", "", title.lower().replace("_", " ")).strip()
    for section, pattern in _TITLES:
        if pattern.search(words):
            return section
    return "other"


def split_sections(text: str) -> list[tuple[Section, str]]:
    """Split into (section, body) in order. Headings that are not one of the contract's
    sections (a "### Case 1" inside the proof) stay inside the section they appear in; text
    before the first recognised heading is section "other"."""
    parts: list[tuple[Section, str]] = []
    current: Section = "other"
    start = 0
    for match in _HEADING.finditer(text):
        title = match.group("hash") or match.group("bold") or ""
        section = _classify(title)
        if section == "other":
            continue
        parts.append((current, text[start : match.start()]))
        current = section
        start = match.end()
    parts.append((current, text[start:]))
    return [(section, body.strip("\n")) for section, body in parts if body.strip()]


def _join(parts: list[tuple[Section, str]], wanted: Section) -> str:
    return "\n\n".join(body.strip() for section, body in parts if section == wanted).strip()


def extract_proof(text: str) -> ProofParts:
    """The parts of a generator or reviser output; never raises."""
    visible = strip_thinking(text)
    parts = split_sections(visible)
    sections = {section for section, _ in parts}
    followed = "proof" in sections
    # Without a "## Proof" heading, everything not recognisably self-assessment, answer or
    # responses is the proof (a tolerant reading of a model that ignored the format).
    body = _join(parts, "proof") if followed else _join(parts, "other")
    answer_text = _join(parts, "final_answer")
    shown = f"## Proof\n\n{body}" if body else ""
    if answer_text:
        shown = f"{shown}\n\n## Final answer\n\n{answer_text}".strip()
    # "Not applicable" (a proof-only problem) stays in the text others see but is no answer.
    final_answer = None if not answer_text or _NO_ANSWER.match(answer_text) else answer_text
    return ProofParts(
        proof=shown,
        body=body,
        self_assessment=_join(parts, "self_assessment"),
        final_answer=final_answer,
        responses=_join(parts, "responses"),
        followed_contract=followed,
    )


_NO_ANSWER = re.compile(r"^\W*(not applicable|n/a|no answer required)\W*$", re.IGNORECASE)
_STATUS = re.compile(r"\bstatus\b\W{0,5}(complete|partial|incomplete|unsolved)", re.IGNORECASE)


def claimed_status(self_assessment: str) -> Literal["complete", "partial", "unknown"]:
    """The status the model claims for itself (recorded, never trusted for acceptance)."""
    match = _STATUS.search(self_assessment)
    if match is None:
        return "unknown"
    return "complete" if match.group(1).lower() == "complete" else "partial"


def parse_proof_output(text: str, output: type[_Out], conservative: _Out) -> _Out:
    """The one reading of a proof-writing role's reply (generator, its self-improvement turn,
    reviser, recombiner); never raises. Without a ``## Proof`` heading the visible text is
    taken as the proof and ``parsed`` is False; with no visible text at all the result is
    ``conservative``. ``responses`` is filled only where ``output`` has that field."""
    parts = extract_proof(text)
    if not parts.body.strip():
        return conservative
    fields: dict[str, Any] = {
        "parsed": parts.followed_contract,
        "parse_note": "" if parts.followed_contract else "no '## Proof' section",
        "proof": parts.proof,
        "body": parts.body,
        "final_answer": parts.final_answer,
        "self_assessment": parts.self_assessment,
        "claimed_status": claimed_status(parts.self_assessment),
    }
    if "responses" in output.model_fields:
        fields["responses"] = parts.responses
    return output(**fields)
