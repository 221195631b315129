"""Which role a recorded request is for, read from its system prompt: what role-aware
scripted endpoints (tests, benchmarks) answer by."""

from __future__ import annotations

from solver.testing.fake_endpoint import RecordedRequest

__all__ = ["role_of"]


def role_of(request: RecordedRequest) -> str:
    """The role whose fixed system prompt the request carries; AssertionError otherwise."""
    system = request.system_text
    if "chief grader" in system:
        return "reconcile"
    if "you graded this proof before" in system:
        return "rejudge"
    if "drafting the marking scheme" in system:
        return "rubric_writer"
    if "revising a proof" in system:
        return "reviser"
    if "several attempted proofs" in system:
        return "recombiner"
    if "writing a solution to an olympiad problem" in system:
        return "generator"
    if "find every error and every gap" in system:
        return "verifier"
    if "review each finding" in system:
        return "reviewer"
    if "material from the organisers" in system:
        return "evaluation"
    if "Score the proof" in system:
        return "grader"
    if "choose which of several candidate proofs" in system:
        return "selector"
    if "compare two candidate proofs" in system:
        return "selector"  # the pairwise variant
    raise AssertionError(f"unrecognised role; system prompt starts {system[:80]!r}")
