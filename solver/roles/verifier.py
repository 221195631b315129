"""Verifier: find every error and gap in one proof; never fix anything.

Sees the problem and the proof text (thinking and self-assessment stripped). Output contract: a
JSON object ``{"findings": [{"id", "location", "severity", "explanation"}], "verdict"}`` where
``location`` quotes the proof and severity is critical | major | minor. A "pass" that carries a
critical or major finding counts as a fail; output that does not parse counts as a fail.

Only the JSON block can pass a proof, and only with a bare "pass": a qualified verdict ("pass
with reservations") is a fail, and prose without the block can fail a proof but never pass it.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field

from solver.roles.base import Kind, RoleInputs, RoleOutput
from solver.roles.facts import ProofFinding as ProofFinding
from solver.roles.facts import Severity as Severity
from solver.roles.facts import VerificationFacts
from solver.roles.jsonblock import find_object, lower_keys
from solver.roles.proof import strip_thinking

NAME = "verifier"
# A later check of an accepted proof (a final or recheck round) by another model family
# (``roles.checker``): the verifier's inputs, templates and contract under a key of its own,
# so its calls can be routed, and audited, apart.
CHECK = "verifier:check"
VARIANTS: tuple[str, ...] = ("stepwise", "adversarial", "structure-first")
TEMPLATES: dict[str, tuple[str, str]] = {
    variant: (f"verifier/{variant}.system.j2", "verifier/user.j2") for variant in VARIANTS
}

BLOCKING: frozenset[str] = frozenset({"critical", "major"})


class Inputs(RoleInputs):
    problem_statement: Annotated[str, Kind("problem_statement"), Field(min_length=1)]
    proof_text: Annotated[str, Kind("proof_text"), Field(min_length=1)]


class Output(RoleOutput):
    findings: tuple[ProofFinding, ...]
    verdict: Literal["pass", "fail"]
    stated_verdict: Literal["pass", "fail", "missing"]

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    @property
    def blocking_findings(self) -> tuple[ProofFinding, ...]:
        return tuple(f for f in self.findings if f.severity in BLOCKING)

    def facts(self) -> VerificationFacts:
        return VerificationFacts(verdict=self.verdict, findings=self.findings)


CONSERVATIVE = Output(
    parsed=False,
    parse_note="no verdict",
    findings=(),
    verdict="fail",
    stated_verdict="missing",
)

_PASS_WORDS = {"pass", "passed", "correct", "valid", "accept", "accepted", "yes", "true"}
_FAIL_WORDS = {"fail", "failed", "incorrect", "invalid", "reject", "rejected", "no", "false"}


def normalise_severity(value: object) -> Severity:
    """Anything unrecognised is treated as major: an unclassified defect still blocks."""
    text = str(value).strip().lower()
    if text.startswith("minor") or text in {"low", "trivial", "cosmetic", "presentation"}:
        return "minor"
    if text.startswith("crit") or "error" in text:
        return "critical"
    return "major"


def _verdict_word(value: object) -> Literal["pass", "fail", "missing"]:
    """A pass must be unqualified: any other word beside it ("pass with reservations", "pass
    but not rigorous") makes the verdict a fail, since the model itself hedged."""
    if isinstance(value, bool):
        return "pass" if value else "fail"
    words = re.findall(r"[a-z]+", str(value).lower())
    if not words:
        return "missing"
    if len(words) == 1 and words[0] in _PASS_WORDS:
        return "pass"
    if _PASS_WORDS.intersection(words) or _FAIL_WORDS.intersection(words) or words[0] == "not":
        return "fail"
    return "missing"


def _findings(raw: Any) -> tuple[ProofFinding, ...]:
    if not isinstance(raw, list):
        return ()
    findings: list[ProofFinding] = []
    items = [lower_keys(item) for item in raw if isinstance(item, dict)]
    # A missing id takes a number no explicit id uses, so it never shadows a finding the
    # verifier named itself ("F1" with no id before it stays F1).
    explicit = {str(d.get("id") or "").strip()[:40] for d in items}
    used: set[str] = set()
    for number, data in enumerate(items, start=1):
        ident = str(data.get("id") or "").strip()[:40]
        if not ident:
            spare = number
            while f"F{spare}" in explicit or f"F{spare}" in used:
                spare += 1
            ident = f"F{spare}"
        while ident in used:
            ident = f"{ident}'"
        used.add(ident)
        location = data.get("location", data.get("quote", data.get("where", "")))
        explanation = data.get("explanation", data.get("issue", data.get("description", "")))
        findings.append(
            ProofFinding(
                id=ident,
                location=str(location).strip(),
                severity=normalise_severity(data.get("severity", data.get("class", "major"))),
                explanation=str(explanation).strip(),
            )
        )
    return tuple(findings)


def _accept(value: dict[str, Any]) -> bool:
    keys = lower_keys(value)
    return "verdict" in keys or "findings" in keys


_PROSE_VERDICT = re.compile(r"verdict\W{0,6}(pass(?:ed)?|fail(?:ed)?)\b", re.IGNORECASE)


def _from_prose(text: str) -> Output:
    """Without the JSON block only a fail is believed: a prose "pass" may sit beside prose
    that describes a serious gap, and an unreadable report must never accept a proof."""
    verdicts = [v.lower() for v in _PROSE_VERDICT.findall(text)]
    if any(v.startswith("f") for v in verdicts):
        return Output(
            parsed=True,
            parse_note="verdict 'fail' read from prose (no JSON block)",
            findings=(),
            verdict="fail",
            stated_verdict="fail",
        )
    if verdicts:
        return CONSERVATIVE.model_copy(
            update={"parse_note": "prose verdict 'pass' without the JSON block counts as fail"}
        )
    return CONSERVATIVE


def parse(text: str) -> Output:
    """Never raises; see the module docstring for the contract."""
    visible = strip_thinking(text)
    found = find_object(visible, _accept)
    if found is None:
        return _from_prose(visible)
    data = lower_keys(found)
    findings = _findings(data.get("findings", data.get("issues", [])))
    stated = _verdict_word(data.get("verdict", ""))
    blocking = any(f.severity in BLOCKING for f in findings)
    verdict: Literal["pass", "fail"] = "pass" if stated == "pass" and not blocking else "fail"
    note = ""
    raw_words = re.findall(r"[a-z]+", str(data.get("verdict", "")).lower())
    if stated == "fail" and raw_words[:1] and raw_words[0] in _PASS_WORDS:
        note = "a qualified 'pass' counts as fail"
    elif stated == "missing":
        note = "no verdict in the JSON block"
    elif stated == "pass" and blocking:
        note = "verdict 'pass' with a critical or major finding counts as fail"
    return Output(
        parsed=stated != "missing",
        parse_note=note,
        findings=findings,
        verdict=verdict,
        stated_verdict=stated,
    )


def _folded(text: object) -> str:
    words = "".join(ch.lower() if ch.isalnum() else " " for ch in str(text or ""))
    return " ".join(words.split())


# A quoted location or an explanation shorter than this (after folding) is too generic
# ("step 2", "gap", or nothing at all) to say that two findings are the same.
_MIN_LOCATION_CHARS = 16
_MIN_EXPLANATION_CHARS = 16


def finding_keys(location: object, explanation: object) -> set[str]:
    """A finding's identities; two findings are the same flaw when any key is shared (the
    loop's recurrence check across versions, and the reviser's merging of duplicates). Its
    whole explanation (not just its start: two flaws may open with the same stock phrase),
    and the passage it quotes (a revision that left the passage as it was keeps the flaw),
    each only when specific enough. Both are case-, whitespace- and punctuation-folded;
    severity is left out, since a reviewer may re-rate the same flaw."""
    keys: set[str] = set()
    folded = _folded(explanation)
    if len(folded) >= _MIN_EXPLANATION_CHARS:
        keys.add(f"explanation:{folded}")
    quoted = _folded(location)
    if len(quoted) >= _MIN_LOCATION_CHARS:
        keys.add(f"location:{quoted[:120]}")
    return keys


def format_report(output: Output) -> str:
    """One verifier report as the reviewer is shown it: findings only, canonical layout."""
    if not output.findings:
        return f"Verdict: {output.verdict}\n\nNo findings were reported."
    blocks = [
        f"### Finding {f.id} (severity: {f.severity})\n"
        f"Location: {f.location or '(not given)'}\n"
        f"Explanation: {f.explanation or '(not given)'}"
        for f in output.findings
    ]
    return f"Verdict: {output.verdict}\n\n" + "\n\n".join(blocks)
