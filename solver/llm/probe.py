"""What the server says about itself, and prompt sizes for capping ``max_tokens``.

Context length sources: SGLang and vLLM put ``max_model_len`` on each ``/v1/models`` entry;
llama.cpp puts ``meta.n_ctx_train`` there and the served ``n_ctx`` in ``/props``
(``default_generation_settings.n_ctx``).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from solver.wire import (
    ImagePart,
    Request,
    ServerInfo,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = [
    "custom_logit_processor_enabled",
    "estimate_prompt_tokens",
    "parse_server_info",
    "prompt_tokens_from_error",
]

_PER_MESSAGE = 8  # chat-template tokens around each message
_PER_IMAGE = 1024


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and value > 0 else None


def parse_server_info(raw: bytes, url: str) -> ServerInfo:
    """A :class:`ServerInfo` from a ``/v1/models`` or llama.cpp ``/props`` body."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return ServerInfo(models=(), context_length=None, raw=raw, url=url)
    models: list[str] = []
    context: int | None = None
    server: str | None = None
    if isinstance(body, dict):
        settings = body.get("default_generation_settings")
        if isinstance(settings, dict):
            context = _positive_int(settings.get("n_ctx"))
        context = context or _positive_int(body.get("n_ctx"))
        for entry in body.get("data") or []:
            if not isinstance(entry, dict):
                continue
            if isinstance(entry.get("id"), str):
                models.append(entry["id"])
            owner = entry.get("owned_by")
            if server is None and isinstance(owner, str) and owner:
                server = owner[:64]
            meta: dict[str, Any] = entry["meta"] if isinstance(entry.get("meta"), dict) else {}
            found = (
                _positive_int(entry.get("max_model_len"))
                or _positive_int(entry.get("context_length"))
                or _positive_int(meta.get("n_ctx"))
                or _positive_int(meta.get("n_ctx_train"))
            )
            if context is None and found is not None:
                context = found
    return ServerInfo(models=tuple(models), context_length=context, raw=raw, url=url, server=server)


def custom_logit_processor_enabled(raw: bytes) -> bool | None:
    """SGLang's ``/server_info`` holds its server arguments at the top level, among them
    ``enable_custom_logit_processor``; None when the body does not say."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    value = body.get("enable_custom_logit_processor") if isinstance(body, dict) else None
    return value if isinstance(value, bool) else None


def estimate_prompt_tokens(request: Request) -> int:
    """An upper-leaning estimate: one token per 3 UTF-8 bytes (GLM tokenises English at about
    4 bytes and math/CJK at 2-3 bytes a token), plus template overhead. Pass an exact counter
    to the client where it matters; a server that rejects the size says the exact count."""
    size = 0
    images = 0
    for message in request.messages:
        for part in message.parts:
            if isinstance(part, TextPart | ThinkingPart):
                size += len(part.text.encode())
            elif isinstance(part, ToolCallPart):
                size += len(part.name) + len(part.arguments.encode())
            elif isinstance(part, ToolResultPart):
                size += len(part.content.encode())
            elif isinstance(part, ImagePart):
                images += 1
    for tool in request.tools:
        size += len(orjson.dumps(tool.parameters)) + len(tool.description.encode())
    return (size + 2) // 3 + _PER_MESSAGE * len(request.messages) + _PER_IMAGE * images


_PROMPT_COUNT = (
    re.compile(r"(\d+) tokens from the input"),  # SGLang
    re.compile(r"\((\d+) in the messages"),  # vLLM
    re.compile(r"messages resulted in (\d+) tokens"),  # OpenAI style
    re.compile(r'"n_prompt_tokens"\s*:\s*(\d+)'),  # llama.cpp
    re.compile(r"prompt is too long: (\d+) tokens"),  # Anthropic style
)


def prompt_tokens_from_error(text: str) -> int | None:
    """The prompt size a context-length error message states, if it states one."""
    for pattern in _PROMPT_COUNT:
        match = pattern.search(text)
        if match:
            return int(match.group(1))
    return None
