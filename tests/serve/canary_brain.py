"""A scripted 'model' for the canary tests: it answers each canary probe correctly by reading
the prompt (independently of serve/canary_probes.py), and wrappers inject the faults the canary
must catch."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import threading
import time
from collections.abc import Callable

from solver.testing import RecordedRequest
from solver.testing.fake_endpoint import Reply

Brain = Callable[[RecordedRequest], Reply]


def _chain_answer(prompt: str) -> str:
    x = int(re.search(r"Start with x = (\d+)", prompt).group(1))  # type: ignore[union-attr]
    modulus = int(re.search(r"x modulo (\d+)", prompt).group(1))  # type: ignore[union-attr]
    lines = []
    for match in re.finditer(r"operation (\d+): (add|subtract|multiply by) (\d+)", prompt):
        step, op, k = int(match.group(1)), match.group(2), int(match.group(3))
        x = x + k if op == "add" else x - k if op == "subtract" else x * k
        x %= modulus
        lines.append(f"step {step}: {x}")
    return "\n".join(lines)


def _primes_answer(count: int) -> str:
    primes = [n for n in range(2, 1000) if all(n % d for d in range(2, int(n**0.5) + 1))][:count]
    return ", ".join(map(str, primes)) + f"\nsum: {sum(primes)}"


def healthy(request: RecordedRequest) -> Reply:
    prompt = request.user_text
    if request.json.get("tools"):
        match = re.search(r"measurement of (\d+) (\w+)", prompt)
        assert match is not None
        arguments = json.dumps(
            {"value": int(match.group(1)), "unit": match.group(2), "exact": True}
        )
        return Reply(
            reasoning="The user wants the tool called.",
            tool_calls=[("call_0", "record_measurement", arguments)],
            finish_reason="tool_calls",
        )
    if "operation 1:" in prompt:
        return Reply(reasoning="Apply each operation in turn.", text=_chain_answer(prompt))
    primes = re.search(r"first (\d+) prime numbers", prompt)
    if primes is not None:
        return Reply(reasoning="List them.", text=_primes_answer(int(primes.group(1))))
    vault = re.search(r"access code of the (\w+) vault is (\d{6})", prompt)
    if vault is not None:
        return Reply(text=vault.group(2))
    # any other prompt: a fixed, prompt-dependent answer (greedy decoding is a function)
    digest = hashlib.sha256(prompt.encode()).hexdigest()
    return Reply(reasoning=f"Thinking about {digest[:8]}.", text=f"Answer {digest} " * 4)


def corrupt_long_outputs(brain: Brain, after_chars: int = 2000) -> Brain:
    """Digits after ``after_chars`` characters of output come out wrong: fine on short answers,
    wrong on long reasoning (the shape of the gfx950 Block-FP8 bug)."""

    def wrapped(request: RecordedRequest) -> Reply:
        reply = brain(request)
        text = reply.text
        if len(text) > after_chars:
            tail = "".join(str((int(c) + 1) % 10) if c.isdigit() else c for c in text[after_chars:])
            reply.text = text[:after_chars] + tail
        return reply

    return wrapped


def nondeterministic(brain: Brain) -> Brain:
    """Every answer carries a suffix no other answer has, so any two runs of one prompt differ.

    A random digit would collide one time in ten and make the test that uses it flaky."""
    served = itertools.count()

    def wrapped(request: RecordedRequest) -> Reply:
        reply = brain(request)
        if reply.text and not reply.tool_calls:
            reply.text += f" {next(served)}"
        return reply

    return wrapped


def string_tool_arguments(brain: Brain) -> Brain:
    """Integers streamed as strings, as GLM tool parsers do (sglang#35564)."""

    def wrapped(request: RecordedRequest) -> Reply:
        reply = brain(request)
        calls = []
        for call_id, name, arguments in reply.tool_calls:
            args = json.loads(arguments)
            as_strings = {
                k: str(v) if isinstance(v, int) and not isinstance(v, bool) else v
                for k, v in args.items()
            }
            calls.append((call_id, name, json.dumps(as_strings)))
        reply.tool_calls = calls
        return reply

    return wrapped


def answer_left_in_reasoning(brain: Brain) -> Brain:
    """The glm45 parser bug of sglang#37645: everything in reasoning_content, content empty."""

    def wrapped(request: RecordedRequest) -> Reply:
        reply = brain(request)
        if not reply.tool_calls:
            reply.reasoning, reply.text = reply.reasoning + reply.text, ""
        return reply

    return wrapped


def batch_variant(brain: Brain, same_for: int) -> Brain:
    """The first ``same_for`` answers to each prompt agree, later ones differ: repeats in a row
    match, the same prompt inside a batch does not (stock SGLang without deterministic mode)."""
    seen: dict[str, int] = {}

    def wrapped(request: RecordedRequest) -> Reply:
        reply = brain(request)
        count = seen.get(request.user_text, 0)
        seen[request.user_text] = count + 1
        if count >= same_for and reply.text and not reply.tool_calls:
            reply.text += f" variant {count}"
        return reply

    return wrapped


def wrong_final_answers(brain: Brain) -> Brain:
    """Every other answer states a wrong sum: a real fault, not a batching difference."""
    served = itertools.count()

    def wrapped(request: RecordedRequest) -> Reply:
        reply = brain(request)
        if "sum: " in reply.text and next(served) % 2:
            reply.text = re.sub(r"sum: (\d+)", lambda m: f"sum: {int(m.group(1)) + 1}", reply.text)
        return reply

    return wrapped


def wrong_at_high_concurrency(brain: Brain, above: int = 16, hold: float = 0.2) -> Brain:
    """Chain answers go wrong while more than ``above`` requests are in flight together (the
    shape of a kernel that fails only on large verify batches). Each request is held ``hold``
    seconds so that requests sent together overlap; requests sent one after another never do."""
    lock = threading.Lock()
    in_flight = [0]

    def wrapped(request: RecordedRequest) -> Reply:
        with lock:
            in_flight[0] += 1
        time.sleep(hold)
        with lock:
            crowded = in_flight[0] > above
            in_flight[0] -= 1
        reply = brain(request)
        if crowded and "step 1:" in reply.text:
            reply.text = re.sub(r"step (\d+): (\d+)", r"step \1: 1\2", reply.text)
        return reply

    return wrapped
