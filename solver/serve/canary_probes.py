"""The canary's prompts and the checks of their answers: pure functions, no I/O.

The probes target numerics that pass short prompts and fail long reasoning (the gfx950
Block-FP8 bug of sglang#28685 gave fluent short answers and GSM8K 0.0): a long chain of exact
arithmetic whose every step is checked, and recall of a fact planted deep in a long context.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

# Characters per token used to size filler text: English prose tokenises at about 4 characters
# per token with GLM's tokenizer; budgeting uses the conservative 3, placing uses 4.
CHARS_PER_TOKEN_PLACE = 4.0
CHARS_PER_TOKEN_BUDGET = 3.0
RECALL_DEPTHS = (1024, 32768, 131072)
MODULUS = 1000

DETERMINISM_PROMPT = (
    "Write the first 40 prime numbers in increasing order, separated by commas, then on a new "
    "line write 'sum: ' followed by their sum. Output nothing else."
)
PRIME_COUNT = 40
# Distinct companions so the batch differs in composition as well as in size.
BATCH_COMPANIONS = (
    "Name the planets of the solar system in order from the Sun, one per line.",
    "Write the numbers from 1 to 30 in English words, separated by commas.",
    "List the chemical symbols of the first 20 elements, separated by spaces.",
)
REASONING_PROMPT = (
    "A rectangle has perimeter 46 and area 120. What are its side lengths? Think it through, "
    "then answer with the two lengths."
)
TOOL_VALUE, TOOL_UNIT = 1234, "mm"
TOOL_PROMPT = (
    f"Record a measurement of {TOOL_VALUE} {TOOL_UNIT}, which is exact, by calling the "
    "record_measurement tool. Do not answer in text."
)
TOOL_SPEC: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "record_measurement",
        "description": "Record one measurement.",
        "parameters": {
            "type": "object",
            "properties": {
                "value": {"type": "integer", "description": "the measured value"},
                "unit": {"type": "string", "description": "the unit, e.g. mm"},
                "exact": {"type": "boolean", "description": "whether the value is exact"},
            },
            "required": ["value", "unit", "exact"],
        },
    },
}


# ---------------------------------------------------------------- arithmetic chain


@dataclass(frozen=True, slots=True)
class Chain:
    start: int
    operations: tuple[tuple[str, int], ...]  # ("add" | "subtract" | "multiply", k)

    def values(self) -> list[int]:
        out, x = [], self.start
        for op, k in self.operations:
            x = x + k if op == "add" else x - k if op == "subtract" else x * k
            x %= MODULUS
            out.append(x)
        return out


def make_chain(steps: int, seed: int = 7) -> Chain:
    rng = random.Random(seed)
    ops: list[tuple[str, int]] = []
    for _ in range(steps):
        op = rng.choice(("add", "subtract", "multiply"))
        k = rng.randint(2, 9) if op == "multiply" else rng.randint(11, 99)
        ops.append((op, k))
    return Chain(start=rng.randint(100, 999), operations=tuple(ops))


def chain_prompt(chain: Chain) -> str:
    words = {"add": "add {k}", "subtract": "subtract {k}", "multiply": "multiply by {k}"}
    lines = [
        f"Start with x = {chain.start}. Apply the {len(chain.operations)} operations below in "
        f"order. After every operation replace x by x modulo {MODULUS} (a number from 0 to "
        f"{MODULUS - 1}; for a negative x add {MODULUS} first).",
        "In your final answer write one line per operation, exactly in the form "
        "'step N: VALUE' where VALUE is x after operation N, and nothing else.",
        "",
    ]
    lines += [
        f"operation {i}: " + words[op].format(k=k) for i, (op, k) in enumerate(chain.operations, 1)
    ]
    return "\n".join(lines)


_STEP = re.compile(r"step\s*(\d+)\s*[:=]\s*(-?\d+)", re.IGNORECASE)


def check_chain(chain: Chain, answer: str) -> dict[str, Any]:
    """Every step checked: how many are right, the first wrong one, how many are missing."""
    expected = chain.values()
    given: dict[int, int] = {}
    for match in _STEP.finditer(answer):
        given.setdefault(int(match.group(1)), int(match.group(2)))
    correct, first_wrong, missing = 0, None, 0
    for index, value in enumerate(expected, 1):
        if index not in given:
            missing += 1
            if first_wrong is None:
                first_wrong = index
        elif given[index] == value:
            correct += 1
        elif first_wrong is None:
            first_wrong = index
    return {
        "steps": len(expected),
        "correct": correct,
        "missing": missing,
        "first_wrong_step": first_wrong,
    }


# ---------------------------------------------------------------- recall


@dataclass(frozen=True, slots=True)
class RecallItem:
    depth_tokens: int  # about how many tokens of context precede the question
    vault: str
    code: str
    prompt: str


_FILLER = (
    "Log entry {n}: the survey team at station {n} measured the river, noted the weather, "
    "checked the instruments and filed an ordinary report with nothing unusual in it."
)


def recall_depths(context_length: int | None, answer_budget: int) -> list[int]:
    """The depths to probe: 1k, 32k, 128k, each clamped to what the served context allows, and
    kept only when it still adds a deeper probe."""
    if context_length is None:
        return [RECALL_DEPTHS[0]]
    usable = int((context_length - answer_budget) * CHARS_PER_TOKEN_BUDGET / CHARS_PER_TOKEN_PLACE)
    depths: list[int] = []
    for target in RECALL_DEPTHS:
        depth = min(target, usable)
        if depth >= 512 and (not depths or depth > depths[-1] * 1.2):
            depths.append(depth)
    return depths


def recall_item(depth_tokens: int, seed: int) -> RecallItem:
    """A prompt of about ``depth_tokens`` tokens with one fact planted near its start."""
    rng = random.Random(seed)
    vault = rng.choice(("amber", "cobalt", "juniper", "saffron", "tundra", "willow"))
    code = f"{rng.randint(100000, 999999)}"
    fact = f"Important: the access code of the {vault} vault is {code}."
    target_chars = int(depth_tokens * CHARS_PER_TOKEN_PLACE)
    parts: list[str] = []
    size, n = 0, 1
    planted = False
    while size < target_chars:
        if not planted and size >= target_chars // 10:
            parts.append(fact)
            planted = True
        line = _FILLER.format(n=n)
        parts.append(line)
        size += len(line) + 1
        n += 1
    if not planted:
        parts.insert(0, fact)
    question = (
        f"\n\nQuestion: what is the access code of the {vault} vault? Answer with the six-digit "
        "code only."
    )
    return RecallItem(depth_tokens, vault, code, "\n".join(parts) + question)


# ---------------------------------------------------------------- tool call


def check_tool_call(name: str, arguments: str) -> tuple[bool, str]:
    if name != "record_measurement":
        return False, f"called {name!r}"
    try:
        args = json.loads(arguments)
    except ValueError:
        return False, f"arguments are not JSON: {arguments[:80]!r}"
    if not isinstance(args, dict):
        return False, "arguments are not a JSON object"
    value = args.get("value")
    # bool is an int subclass in Python; a string "1234" is the known GLM streaming bug
    if not isinstance(value, int) or isinstance(value, bool):
        return False, f"value has type {type(value).__name__}, expected integer (sglang#35564)"
    if value != TOOL_VALUE:
        return False, f"value {value} != {TOOL_VALUE}"
    if args.get("unit") != TOOL_UNIT:
        return False, f"unit {args.get('unit')!r} != {TOOL_UNIT!r}"
    if args.get("exact") is not True:
        return False, f"exact is {args.get('exact')!r}, expected true"
    return True, "valid JSON arguments of the right types"


# ---------------------------------------------------------------- determinism


def first_primes(count: int) -> list[int]:
    primes: list[int] = []
    candidate = 2
    while len(primes) < count:
        if all(candidate % p for p in primes if p * p <= candidate):
            primes.append(candidate)
        candidate += 1
    return primes


_NUMBER = re.compile(r"\d+")
_SUM = re.compile(r"sum\s*[:=]\s*(\d+)", re.IGNORECASE)


def determinism_answer(content: str) -> tuple[tuple[int, ...], int | None]:
    """The final answer of the determinism prompt: the listed numbers and the stated sum."""
    match = _SUM.search(content)
    listed = content[: match.start()] if match else content
    numbers = tuple(int(n) for n in _NUMBER.findall(listed))
    return numbers, int(match.group(1)) if match else None


def determinism_answer_is_right(content: str) -> bool:
    numbers, total = determinism_answer(content)
    primes = first_primes(PRIME_COUNT)
    return numbers == tuple(primes) and total == sum(primes)


def first_difference(a: str, b: str) -> int:
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return min(len(a), len(b)) if len(a) != len(b) else -1
