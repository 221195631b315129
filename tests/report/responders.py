"""Role-aware scripted responders for the report and eval tests.

The role of a request is recognised from its system prompt; each answer depends only on the
request's content, so a run that is killed and resumed sees the answers an uninterrupted run
sees. Problems whose statement contains ``HARD`` never get a complete proof.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from solver.cli.eval import eval_group
from solver.testing import FakeEndpoint, RecordedRequest
from solver.testing.fake_endpoint import Reply
from tests.loop.scripts import FLAW_FINDING, GOOD_PROOF, SCHEME, json_reply, role_of

__all__ = [
    "GOOD_PROOF",
    "calibrate_with_variants",
    "calibration_grader",
    "disagreeing_graders",
    "judging_reviewer",
    "judging_selector",
    "kill_eval_when",
    "olympiad",
    "pair_grader",
    "slow",
    "variant_verifier",
    "write_graded",
]

FLAW = "FLAW: we also assume without proof that $a=b$."
FINDING = FLAW_FINDING
_json = json_reply


def _proof(body: str) -> Reply:
    text = (
        f"## Proof\n\n{body}\n\n## Final answer\n\nNot applicable\n\n"
        "## Self-assessment\n\nStatus: complete."
    )
    return Reply(text=text, reasoning="thinking about parity", chunk_chars=64)


def _reviews(request: RecordedRequest) -> Reply:
    ids = sorted({part.split('"')[0] for part in request.user_text.split('"id": "')[1:]})
    reviews = [
        {"id": i, "decision": "confirmed", "severity": "major", "reason": "real"}
        for i in ids or ["F1"]
    ]
    return _json("Review.", {"reviews": reviews})


def olympiad(request: RecordedRequest) -> Reply:
    """Proofs of HARD problems keep a confirmed flaw and grade 2; others are fixed and grade 7."""
    role = role_of(request)
    hard = "HARD" in request.user_text
    if role == "generator":
        return _proof(f"{GOOD_PROOF} {FLAW}")
    if role == "reviser":
        return _proof(f"{GOOD_PROOF} {FLAW}" if hard else GOOD_PROOF)
    if role == "verifier":
        findings = [FINDING] if "FLAW" in request.user_text else []
        return _json("Analysis.", {"findings": findings, "verdict": "fail" if findings else "pass"})
    if role == "reviewer":
        return _reviews(request)
    if role in ("grader", "evaluation"):
        score = 2 if "FLAW" in request.user_text else 7
        return _json("Assessment.", {"score": score, "justification": "as checked"})
    if role in ("reconcile", "rejudge"):
        return _json("Reconciled.", {"score": 5, "justification": "decided"})
    if role == "rubric_writer":
        return _json("Scheme.", {"checkpoints": SCHEME})
    return _json("Choice.", {"choice": "A", "reason": "most rigorous"})


def slow(
    responder: Callable[[RecordedRequest], Reply], delay: float
) -> Callable[[RecordedRequest], Reply]:
    def answer(request: RecordedRequest) -> Reply:
        reply = responder(request)
        reply.chunk_delay = delay
        reply.chunk_chars = 16
        return reply

    return answer


def disagreeing_graders(scores: list[int]) -> Callable[[RecordedRequest], Reply]:
    """``olympiad``, except that evaluation graders answer ``scores`` in turn (cycling)."""
    turn = itertools.cycle(scores)
    lock = threading.Lock()

    def answer(request: RecordedRequest) -> Reply:
        if role_of(request) == "evaluation":
            with lock:
                score = next(turn)
            return _json("Assessment.", {"score": score, "justification": "my view"})
        return olympiad(request)

    return answer


def calibration_grader(request: RecordedRequest) -> Reply:
    """Grades a given proof by a marker in it: ``GRADE=<n>``."""
    role = role_of(request)
    if role in ("grader", "evaluation"):
        text = request.user_text
        score = int(text.split("GRADE=")[1][0]) if "GRADE=" in text else 0
        return _json("Assessment.", {"score": score, "justification": "marker"})
    return olympiad(request)


def pair_grader() -> Callable[[RecordedRequest], Reply]:
    """Grades a given proof by its marker ``GRADES=<a><b>``: the first grader call of that
    proof answers a, the next b (whatever order concurrent calls arrive in, each proof's pair
    of grades is the same)."""
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def answer(request: RecordedRequest) -> Reply:
        role = role_of(request)
        text = request.user_text
        if role in ("grader", "evaluation") and "GRADES=" in text:
            pair = text.split("GRADES=")[1][:2]
            with lock:
                turn = seen.get(pair + text[:200], 0)
                seen[pair + text[:200]] = turn + 1
            score = int(pair[min(turn, 1)])
            return _json("Assessment.", {"score": score, "justification": "marker"})
        return olympiad(request)

    return answer


def variant_verifier(request: RecordedRequest) -> Reply:
    """Each verifier variant has its own blind spots: the stepwise one ("meticulous") fails a
    proof marked FLAW, the adversarial one ("sceptical") FLAW and SUBTLE, the structure-first
    one ("careful") only ODD, a false alarm where the proof is correct; graders read the GRADE
    marker."""
    if role_of(request) != "verifier":
        return calibration_grader(request)
    text, system = request.user_text, request.system_text
    seen = {"meticulous": ("FLAW",), "sceptical": ("FLAW", "SUBTLE"), "careful": ("ODD",)}
    marks = next((m for word, m in seen.items() if word in system), ())
    fails = any(mark in text for mark in marks)
    findings = [FLAW_FINDING] if fails else []
    return json_reply("Analysis.", {"findings": findings, "verdict": "fail" if fails else "pass"})


def judging_reviewer(request: RecordedRequest) -> Reply:
    """:func:`variant_verifier`, with a reviewer that rejects every finding on a proof
    marked ODD (unless it is also marked KEEP) and confirms every other."""
    if role_of(request) != "reviewer":
        return variant_verifier(request)
    text = request.user_text
    decision = "rejected" if "ODD" in text and "KEEP" not in text else "confirmed"
    ids = sorted({part.split('"')[0] for part in text.split('"id": "')[1:]}) or ["F1"]
    reviews = [{"id": i, "decision": decision, "severity": "major", "reason": "read"} for i in ids]
    return json_reply("Review.", {"reviews": reviews})


def judging_selector(request: RecordedRequest) -> Reply:
    """:func:`calibration_grader`, with a pairwise selector that chooses the proof marked
    GRADE=7 (Proof A when both or neither are)."""
    if role_of(request) != "selector":
        return calibration_grader(request)
    first = request.user_text.split("Proof B", 1)[0]
    choice = "A" if "GRADE=7" in first else "B"
    return json_reply("Choice.", {"choice": choice, "reason": "the complete one"})


REPO = Path(__file__).resolve().parents[2]


def kill_eval_when(args: list[str], ready: Callable[[], bool], waiting_for: str) -> None:
    """Run ``solver eval ARGS`` in a child process and SIGKILL its process group as soon as
    ``ready()`` holds (within 240 s, else AssertionError naming ``waiting_for``)."""
    child = subprocess.Popen(
        [sys.executable, "-m", "solver.cli.main", "eval", *args],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            if ready():
                return
            assert child.poll() is None, "the evaluation ended before it could be killed"
            time.sleep(0.02)
        raise AssertionError(f"no {waiting_for} within 240 s")
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def write_graded(
    file: Path, rows: list[tuple[str, str, int]], problems: dict[str, str] | None = None
) -> None:
    """A JSON Lines file of (id, proof, human grade), each problem "Show <id>." unless
    ``problems`` names another statement for the id."""
    statement = problems or {}
    file.write_text(
        "".join(
            json.dumps(
                {
                    "id": i,
                    "problem": statement.get(i, f"Show {i}."),
                    "proof": proof,
                    "human_grade": human,
                }
            )
            + "\n"
            for i, proof, human in rows
        )
    )


def calibrate_with_variants(
    tmp_path: Path,
    rows: list[tuple[str, str, int]],
    responder: Callable[[RecordedRequest], Reply] = variant_verifier,
) -> tuple[Path, int]:
    """``solver eval calibrate`` of these (id, proof, human grade) rows against
    ``responder`` (:func:`variant_verifier`), one grader and two verifications a variant: the
    calibration directory and how many verifier calls the endpoint answered."""
    file = tmp_path / "graded.jsonl"
    write_graded(file, rows)
    out = tmp_path / "cal"
    with FakeEndpoint(responder) as fake:
        args = ["calibrate", str(file), "--out", str(out), "--endpoint", fake.url + "/v1"]
        result = CliRunner().invoke(eval_group, [*args, "--graders", "1", "--verifications", "2"])
        verifier_calls = sum(role_of(r) == "verifier" for r in fake.requests)
    assert result.exit_code == 0, result.output
    return out, verifier_calls
