"""A thinking budget, the way SGLang takes it over Chat Completions.

SGLang enforces a budget with a custom logit processor: the request names a processor class
(``custom_logit_processor``, a JSON string ``{"callable": "<pickle as hex>"}`` that the server
unpickles with dill) and gives it ``custom_params: {"thinking_budget": N}``. Once N tokens
follow the open ``<think>``, the processor forces a newline and then ``</think>``, so the
model goes on to its answer instead of being cut off at ``max_tokens``. The server takes the
field only when started with ``--enable-custom-logit-processor``; otherwise it answers 400
naming the feature.

The processor sent here is built on the server from SGLang's own
``ThinkingBudgetLogitProcessor`` with the think-token ids of the model's family: SGLang ships
a subclass for GLM-4.5/4.6 (ids 151350/151351) but none for GLM-5, whose tokenizer moved
them (154841/154842). The pickle only calls ``type(name, (that base,), ids)``: it carries no
code of ours, and it is a constant, so the audit re-produces the body byte for byte.
"""

from __future__ import annotations

import json
import struct
from dataclasses import replace
from typing import Any, NamedTuple

from solver.wire.events import Api, Request
from solver.wire.types import ServerInfo

__all__ = [
    "ANSWER_ROOM",
    "BUDGET_FIELDS",
    "PROCESSOR_BASE",
    "ThinkTokens",
    "budget_fields",
    "fitted_budget",
    "processor_string",
    "refusal_names_processor",
    "think_tokens_for",
    "thinking_budget_blocker",
    "with_thinking_budget",
    "without_thinking_budget",
]

# (module, class) of SGLang's base processor: python/sglang/srt/sampling/custom_logit_processor.py
PROCESSOR_BASE = ("sglang.srt.sampling.custom_logit_processor", "ThinkingBudgetLogitProcessor")
# The two Chat fields a budget is sent in (budget_fields).
BUDGET_FIELDS = ("custom_logit_processor", "custom_params")

# Output tokens a budget leaves for the answer after the forced ``</think>``: a budget that
# reaches past ``max_tokens`` minus this would end the call mid-answer, cut as if it had none
# (a visible proof runs to some 3,500 tokens; docs/roles.md, "Sampling and thinking budget").
ANSWER_ROOM = 8192


class ThinkTokens(NamedTuple):
    """Token ids of a model family's thinking markers, and the name its processor takes."""

    family: str
    start: int  # <think>
    end: int  # </think>
    newline: int


_GLM5 = ThinkTokens("Glm5", 154841, 154842, 198)
_GLM4 = ThinkTokens("Glm4Moe", 151350, 151351, 198)  # SGLang's Glm4MoeThinkingBudgetLogitProcessor


def think_tokens_for(model: str) -> ThinkTokens:
    """The think-token ids for a served model name: GLM-4.x by its name, else GLM-5's (the
    family the serve recipes run)."""
    name = model.lower().replace("_", "-")
    if "glm-4" in name or "glm4" in name:
        return _GLM4
    return _GLM5


def _unicode(text: str) -> bytes:
    data = text.encode()
    return b"X" + struct.pack("<I", len(data)) + data  # BINUNICODE


def _int(value: int) -> bytes:
    return b"J" + struct.pack("<i", value)  # BININT


def processor_string(tokens: ThinkTokens) -> str:
    """The ``custom_logit_processor`` value: a protocol-2 pickle of
    ``type(name, (ThinkingBudgetLogitProcessor,), {ids})``, hex in JSON as SGLang's
    ``CustomLogitProcessor.to_str`` writes it (``json.dumps``)."""
    module, base = PROCESSOR_BASE
    attrs = (
        ("THINKING_START_TOKEN_ID", tokens.start),
        ("THINKING_END_TOKEN_ID", tokens.end),
        ("NEW_LINE_TOKEN_ID", tokens.newline),
    )
    program = b"".join(
        [
            b"\x80\x02",  # PROTO 2
            b"cbuiltins\ntype\n",  # GLOBAL builtins.type
            b"(",  # MARK: the arguments of type()
            _unicode(f"{tokens.family}ThinkingBudgetLogitProcessor"),
            f"c{module}\n{base}\n".encode(),
            b"\x85",  # TUPLE1: the bases
            b"}(",  # EMPTY_DICT, MARK
            *(_unicode(key) + _int(value) for key, value in attrs),
            b"u",  # SETITEMS
            b"t",  # TUPLE
            b"R",  # REDUCE: call type(...)
            b".",  # STOP
        ]
    )
    return json.dumps({"callable": program.hex()})


def budget_fields(model: str, budget: int) -> dict[str, Any]:
    """The two Chat fields SGLang reads a thinking budget from, for ``model``'s family."""
    return {
        "custom_logit_processor": processor_string(think_tokens_for(model)),
        "custom_params": {"thinking_budget": budget},
    }


def fitted_budget(budget: int, cap: int, max_tokens: int | None = None) -> int:
    """``budget``, lowered where it would not leave the answer its room under the call's
    ``cap``: the room the configuration left (``max_tokens``, the role's setting, less the
    budget) up to :data:`ANSWER_ROOM`, or all of it where the budget reaches ``max_tokens``;
    at most half the cap. A call not capped below ``max_tokens`` keeps a budget below it."""
    configured = cap if max_tokens is None else max_tokens
    room = ANSWER_ROOM if budget >= configured else min(ANSWER_ROOM, configured - budget)
    return max(min(budget, max(cap - room, cap // 2)), 1)


def with_thinking_budget(request: Request) -> Request:
    """``request`` with its budget in SGLang's Chat fields (in ``extra``, so they are
    recorded with the request and re-produced from the record), fitted to its
    ``max_tokens`` (the call's cap) against its ``max_tokens_setting`` (the role's setting
    before any cap): a call capped by the token budget or to what the context leaves still
    ends with an answer. The one place a budget is fitted; the client calls it on the
    budget as configured."""
    if request.thinking_budget is None:
        return request
    budget = fitted_budget(request.thinking_budget, request.max_tokens, request.max_tokens_setting)
    fields = budget_fields(request.model, budget)
    kept = tuple((k, v) for k, v in request.extra if k not in fields)
    return replace(request, thinking_budget=budget, extra=kept + tuple(fields.items()))


def without_thinking_budget(request: Request) -> Request:
    """``request`` with no budget and none of its fields."""
    kept = tuple((k, v) for k, v in request.extra if k not in BUDGET_FIELDS)
    return replace(request, thinking_budget=None, extra=kept)


def thinking_budget_blocker(api: Api, info: ServerInfo | None) -> str | None:
    """Why a thinking budget cannot be sent to this endpoint; None when it can."""
    if api != "chat":
        return f"the {api} protocol has no thinking-budget field SGLang reads"
    if info is None:
        return "the endpoint did not say what server it is (the probe failed)"
    if info.server != "sglang":
        shown = info.server or "unnamed"
        return f"the server is not SGLang (its models list says owned_by {shown!r})"
    if info.custom_logit_processor is False:
        return "the SGLang server runs without --enable-custom-logit-processor"
    return None


def refusal_names_processor(message: str) -> bool:
    """Whether an error answer is the server refusing the processor fields (SGLang's
    ``TokenizerManager._validate_one_request``: "not configured to enable custom logit
    processor"), or a server refusing an unknown field by its name."""
    text = message.lower()
    return "custom logit processor" in text or any(f in text for f in BUDGET_FIELDS)
