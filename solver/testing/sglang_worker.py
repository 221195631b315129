"""One SGLang worker stand-in behind a real gateway (smg): a role-aware scripted model that
keeps the counters a gateway test reads, in its own process so a test can kill it.

It is :class:`~solver.testing.fake_endpoint.FakeEndpoint` (SGLang-style Chat Completions,
``owned_by: "sglang"``, reasoning then content deltas, a finish chunk, a usage chunk, ``[DONE]``)
answering the solver's six roles as a scripted model would (:func:`olympiad_answer`), plus:

- a **ledger**: one JSON line per request start and one per end, appended and flushed at once,
  so the file still tells what a worker had answered whole after it was SIGKILLed::

      {"event": "start", "t": EPOCH_S, "request_id": X_REQUEST_ID, "sha256": BODY_SHA,
       "role": "verifier", "prompt_chars": 5120, "cached_chars": 4800, "system_chars": 2900}
      {"event": "end", "request_id": X_REQUEST_ID, "sha256": BODY_SHA, "completed": true}

  ``request_id`` is the client's ``X-Request-ID`` (one per attempt; smg 1.13.0 forwards it),
  which the run's journal records on each ``llm.started``; the body hash is of the bytes the
  worker got, which are not the bytes the client sent when a gateway re-serialises the body.

- a **prefix cache** in the way SGLang's radix cache reuses one: a request's cached part is the
  longest prefix (in characters of its messages, roles included) it shares with any earlier
  request on this worker (``system_chars`` of a prompt are its system message: the role's fixed
  instructions, which every problem shares); ``/metrics`` gives ``sglang:prompt_tokens_total``,
  ``sglang:cached_tokens_total`` (characters here, as smg's HTTP string tree counts) and
  ``sglang:num_requests_total``. Nothing is ever evicted: the stand-in's cache is unbounded,
  so what it measures is how well a routing policy keeps shared prefixes together, not a cache
  size.

Run::

    python -m solver.testing.sglang_worker --port N --ledger FILE [--chunk-delay S]

prints ``READY <url>`` once listening; SIGTERM stops it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from solver.testing.fake_endpoint import FakeEndpoint, RecordedRequest
from solver.testing.fake_wire import Reply
from solver.testing.roles import role_of

__all__ = ["PrefixLedger", "olympiad_answer", "prompt_text"]

_PROOF = (
    "Let the odd integers be $2a+1$ and $2b+1$. Then the sum of their squares is "
    "$4(a^2+a+b^2+b)+2 \\equiv 2 \\pmod 4$, while every square is $0$ or $1 \\pmod 4$."
)
_FLAW = "FLAW: we also assume without proof that $a=b$."
_FINDING = {
    "id": "F1",
    "location": "we also assume without proof",
    "severity": "major",
    "explanation": "The proof assumes a equals b without justification.",
}
_SCHEME = [
    {"item": "odd numbers written as 2k+1", "points": 3, "partial": ""},
    {"item": "the sum shown to be even", "points": 4, "partial": "the form alone: 1"},
]


def _json_reply(analysis: str, payload: dict[str, object]) -> Reply:
    return Reply(text=f"{analysis}\n\n```json\n{json.dumps(payload)}\n```", reasoning="checking")


def _proof(body: str) -> Reply:
    text = (
        f"## Proof\n\n{body}\n\n## Final answer\n\nNot applicable\n\n"
        "## Self-assessment\n\nStatus: complete."
    )
    return Reply(text=text, reasoning="thinking about parity")


def olympiad_answer(request: RecordedRequest) -> Reply:
    """A scripted model, by role and content only (a resumed run sees the same answers): the
    first draft carries a flaw the verifier finds and the reviewer confirms; the revision is
    clean, verified and graded 7. Problems whose statement says HARD keep the flaw (grade 2)."""
    role = role_of(request)
    hard = "HARD" in request.user_text
    if role == "generator":
        return _proof(f"{_PROOF} {_FLAW}")
    if role == "reviser":
        return _proof(f"{_PROOF} {_FLAW}" if hard else _PROOF)
    if role == "verifier":
        findings = [_FINDING] if "FLAW" in request.user_text else []
        return _json_reply(
            "Analysis.", {"findings": findings, "verdict": "fail" if findings else "pass"}
        )
    if role == "reviewer":
        ids = sorted({p.split('"')[0] for p in request.user_text.split('"id": "')[1:]})
        reviews = [
            {"id": i, "decision": "confirmed", "severity": "major", "reason": "real"}
            for i in ids or ["F1"]
        ]
        return _json_reply("Review.", {"reviews": reviews})
    if role in ("grader", "evaluation"):
        score = 2 if "FLAW" in request.user_text else 7
        return _json_reply("Assessment.", {"score": score, "justification": "as checked"})
    if role in ("reconcile", "rejudge"):
        return _json_reply("Reconciled.", {"score": 5, "justification": "decided"})
    if role == "rubric_writer":
        return _json_reply("Scheme.", {"checkpoints": _SCHEME})
    return _json_reply("Choice.", {"choice": "A", "reason": "most rigorous"})


def prompt_parts(request: RecordedRequest) -> list[str]:
    """The prompt as a prefix cache sees it: every message's role and text, in order."""
    parts = []
    for message in request.json.get("messages") or []:
        if isinstance(message, dict):
            content = message.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            parts.append(f"<|{message.get('role')}|>{text}")
    return parts


def prompt_text(request: RecordedRequest) -> str:
    return "".join(prompt_parts(request))


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:  # binary search on the first differing position: O(log n) slice compares
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class PrefixLedger:
    """The worker's request counters, prefix cache and ledger file (see the module docstring)."""

    def __init__(self, ledger: Path | None) -> None:
        self._ledger = ledger
        self._lock = threading.Lock()
        self._prompts: list[str] = []
        self.requests = 0
        self.completed = 0
        self.prompt_chars = 0
        self.cached_chars = 0

    def started(self, request: RecordedRequest) -> None:
        parts = prompt_parts(request)
        text = "".join(parts)
        system = len(parts[0]) if parts and parts[0].startswith("<|system|>") else 0
        with self._lock:
            cached = max((_common_prefix(text, seen) for seen in self._prompts), default=0)
            self._prompts.append(text)
            self.requests += 1
            self.prompt_chars += len(text)
            self.cached_chars += cached
        self._write(
            {
                "event": "start",
                "t": time.time(),
                "request_id": request.headers.get("x-request-id"),
                "sha256": hashlib.sha256(request.body).hexdigest(),
                "role": role_of(request),
                "prompt_chars": len(text),
                "cached_chars": cached,
                "system_chars": system,
            }
        )

    def ended(self, request: RecordedRequest, *, completed: bool) -> None:
        with self._lock:
            self.completed += completed
        sha = hashlib.sha256(request.body).hexdigest()
        rid = request.headers.get("x-request-id")
        self._write({"event": "end", "request_id": rid, "sha256": sha, "completed": completed})

    def metrics(self) -> str:
        with self._lock:
            rows = [
                ("sglang:num_requests_total", self.requests),
                ("sglang:prompt_tokens_total", self.prompt_chars),
                ("sglang:cached_tokens_total", self.cached_chars),
            ]
        lines = []
        for name, value in rows:
            lines += [f"# TYPE {name} counter", f"{name} {value}"]
        return "\n".join(lines) + "\n"

    def _write(self, record: dict[str, object]) -> None:
        if self._ledger is None:
            return
        line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        with self._lock:
            # one write(2) per line on an O_APPEND descriptor: a kill never tears one
            fd = os.open(self._ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)


def _slowed(delay: float) -> Callable[[RecordedRequest], Reply]:
    def answer(request: RecordedRequest) -> Reply:
        reply = olympiad_answer(request)
        reply.chunk_chars = 16
        reply.chunk_delay = delay
        return reply

    return answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m solver.testing.sglang_worker")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ledger", type=Path)
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between frames")
    parser.add_argument("--served-model", default="glm-fake")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with FakeEndpoint(
        _slowed(args.chunk_delay),
        served_model=args.served_model,
        port=args.port,
        owned_by="sglang",
        observer=PrefixLedger(args.ledger),
    ) as fake:
        print(f"READY {fake.url}", flush=True)
        while not stop.wait(0.2):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
