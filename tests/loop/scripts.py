"""Role-aware scripted responders for the fake endpoint.

Each responder recognises the role of a request from its system prompt and answers as a
scripted model would. Answers depend only on the request's content, never on order, so a run
that is killed and resumed sees exactly the answers an uninterrupted run sees.

Usable in-process (``FakeEndpoint(responder)``) and by the fake as its own process
(``python -m solver.testing.fake_endpoint --responder tests.loop.scripts:solved``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from solver.testing import RecordedRequest, role_of
from solver.testing.fake_endpoint import Reply

MARK_REASONING = "MARKER-REASONING-7f3a"
MARK_REPORT = "MARKER-REPORT-19c2"
MARK_SELF = "MARKER-SELFASSESS-b81d"

GOOD_PROOF = (
    "Let the odd integers be $2a+1$ and $2b+1$. Then the sum of their squares is "
    "$4(a^2+a+b^2+b)+2 \\equiv 2 \\pmod 4$, while every square is $0$ or $1 \\pmod 4$."
)
FLAWED_PROOF = GOOD_PROOF + " FLAW: we also assume without proof that $a=b$."


def proof_reply(body: str, answer: str = "Not applicable", reasoning: str = "") -> Reply:
    text = (
        f"## Proof\n\n{body}\n\n## Final answer\n\n{answer}\n\n"
        f"## Self-assessment\n\nStatus: complete. {MARK_SELF}"
    )
    return Reply(text=text, reasoning=reasoning or f"thinking {MARK_REASONING}", chunk_chars=64)


def json_reply(analysis: str, payload: dict[str, object]) -> Reply:
    text = f"{analysis}\n\n```json\n{json.dumps(payload)}\n```"
    return Reply(text=text, reasoning="checking", chunk_chars=64)


def verdict(findings: list[dict[str, str]]) -> Reply:
    return json_reply(
        f"Analysis of the proof. {MARK_REPORT}",
        {"findings": findings, "verdict": "fail" if findings else "pass"},
    )


SCHEME = [
    {"item": "odd numbers written as 2k+1", "points": 3, "partial": ""},
    {"item": "the sum shown to be even", "points": 4, "partial": "the form alone: 1"},
]

FLAW_FINDING = {
    "id": "F1",
    "location": "we also assume without proof",
    "severity": "major",
    "explanation": "The proof assumes a equals b without justification.",
}


def _reviews(request: RecordedRequest, decision: str) -> Reply:
    ids = sorted(re.findall(r"### Finding (\S+) \(severity", request.user_text))
    reviews = [{"id": i, "decision": decision, "severity": "major", "reason": "r"} for i in ids]
    return json_reply("Review.", {"reviews": reviews or [{"id": "F1", "decision": decision}]})


def _common(request: RecordedRequest, role: str) -> Reply | None:
    if role in ("grader", "evaluation"):
        return json_reply("Assessment.", {"score": 7, "justification": "complete"})
    if role in ("reconcile", "rejudge"):
        return json_reply("Reconciled.", {"score": 6, "justification": "after review"})
    if role == "rubric_writer":
        return json_reply("Scheme.", {"checkpoints": SCHEME})
    if role == "selector":
        return json_reply("Choice.", {"choice": "A", "reason": "most rigorous"})
    return None


def solved(request: RecordedRequest) -> Reply:
    """Every proof passes every verification."""
    role = role_of(request)
    if role == "generator":
        return proof_reply(GOOD_PROOF)
    if role == "verifier":
        return verdict([])
    if role == "reviewer":
        return _reviews(request, "confirmed")
    return _common(request, role) or Reply(text="?")


def fix_after_finding(request: RecordedRequest) -> Reply:
    """The first proof has a flaw a verifier finds and a reviewer confirms; the reviser fixes it."""
    role = role_of(request)
    if role == "generator":
        return proof_reply(FLAWED_PROOF)
    if role == "reviser":
        return proof_reply(GOOD_PROOF)
    if role == "verifier":
        return verdict([FLAW_FINDING] if "FLAW" in request.user_text else [])
    if role == "reviewer":
        return _reviews(request, "confirmed")
    return _common(request, role) or Reply(text="?")


def reviewer_rejects(request: RecordedRequest) -> Reply:
    """Every verification reports a finding; the reviewer rejects every one."""
    role = role_of(request)
    if role == "generator":
        return proof_reply(FLAWED_PROOF)
    if role == "verifier":
        return verdict([FLAW_FINDING])
    if role == "reviewer":
        return _reviews(request, "rejected")
    return _common(request, role) or Reply(text="?")


def never_accepted(request: RecordedRequest) -> Reply:
    """Every proof keeps a confirmed flaw; graders give partial credit."""
    role = role_of(request)
    if role in ("generator", "reviser"):
        return proof_reply(FLAWED_PROOF)
    if role == "verifier":
        return verdict([FLAW_FINDING])
    if role == "reviewer":
        return _reviews(request, "confirmed")
    if role in ("grader", "evaluation"):
        return json_reply("Assessment.", {"score": 2, "justification": "partial"})
    return _common(request, role) or Reply(text="?")


def unparseable(request: RecordedRequest) -> Reply:
    """Every role answers with text that follows no contract."""
    return Reply(text="I am not sure what you mean.", chunk_chars=16)


def truncated(request: RecordedRequest) -> Reply:
    """Every generator answer is cut off by max_tokens."""
    role = role_of(request)
    if role == "generator":
        return Reply(text="## Proof\n\nLet us consider", finish_reason="length", chunk_chars=8)
    return solved(request)


def slow(delay: float) -> Callable[[RecordedRequest], Reply]:
    """``solved`` with a pause between streamed chunks (for kill tests mid-stream)."""

    def responder(request: RecordedRequest) -> Reply:
        reply = solved(request)
        reply.chunk_delay = delay
        reply.chunk_chars = 24
        return reply

    return responder


slow_solved = slow(0.01)
