"""Thinking signatures: a bridge-owned envelope for thinking that no Anthropic model signed, and
the rule that such signatures never reach an official Anthropic upstream (research b.1, E26).

Claude Code needs a ``signature_delta`` before a thinking block closes (E25), so thinking that
came from a Chat or Responses upstream is given ``olys-bridge-v1:<base64url(json)>``. The JSON
holds a digest of the thinking text, so a replayed block can be recognised as ours.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import replace

from solver.llm.events import Message, Request, ThinkingPart

BRIDGE_PREFIX = "olys-bridge-v1:"


def mint(thinking: str) -> str:
    digest = hashlib.sha256(thinking.encode()).hexdigest()[:32]
    blob = json.dumps({"v": 1, "sha256": digest}, separators=(",", ":")).encode()
    return BRIDGE_PREFIX + base64.urlsafe_b64encode(blob).decode().rstrip("=")


def is_bridge(signature: str) -> bool:
    return signature.startswith(BRIDGE_PREFIX)


def _native(part: ThinkingPart) -> bool:
    """A signature Anthropic itself may have issued: non-empty, not ours, not a timestamp
    (some bridges mint ``Date.now()``, E26)."""
    sig = part.signature
    return bool(sig) and not is_bridge(sig) and not sig.isdigit()


def for_anthropic_upstream(request: Request) -> tuple[Request, int]:
    """Drop every thinking part an official Anthropic upstream would reject; keep native signed
    blocks byte for byte. Returns the request and how many parts were dropped."""
    dropped = 0
    messages: list[Message] = []
    for message in request.messages:
        kept = []
        for part in message.parts:
            if isinstance(part, ThinkingPart) and not _native(part):
                dropped += 1
                continue
            kept.append(part)
        if len(kept) != len(message.parts):
            if not kept:
                continue
            message = Message(role=message.role, parts=tuple(kept))
        messages.append(message)
    if not dropped:
        return request, 0
    return replace(request, messages=tuple(messages)), dropped


def for_other_upstream(request: Request) -> Request:
    """Other upstreams take thinking as plain text: signatures mean nothing there, so strip
    them rather than send a provider-specific token to a stranger."""
    changed = False
    messages: list[Message] = []
    for message in request.messages:
        if any(isinstance(p, ThinkingPart) and p.signature for p in message.parts):
            changed = True
            message = Message(
                role=message.role,
                parts=tuple(
                    ThinkingPart(p.text) if isinstance(p, ThinkingPart) else p
                    for p in message.parts
                ),
            )
        messages.append(message)
    return replace(request, messages=tuple(messages)) if changed else request
