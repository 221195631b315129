"""Thinking signatures: a bridge-owned envelope for thinking that no Anthropic model signed, and
the rule that such signatures never reach an official Anthropic upstream (b1, E26).

Claude Code needs a ``signature_delta`` before a thinking block closes (E25), so thinking that
came from a Chat or Responses upstream is given ``olys-bridge-v1:<base64url(json)>``. The JSON
holds a digest of the thinking text, so a replayed block can be recognised as ours.

A signature an upstream issued goes to the client inside an envelope naming that provider
(``olys-sig-v1.<base64url(name)>.<signature>``); a replayed block is unwrapped only for the same
provider and dropped for any other (b1, E26).
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import replace

from solver.wire import Message, Part, Request, ThinkingPart, ToolCallPart

BRIDGE_PREFIX = "olys-bridge-v1:"
ENVELOPE_PREFIX = "olys-sig-v1."


def mint(thinking: str) -> str:
    digest = hashlib.sha256(thinking.encode()).hexdigest()[:32]
    blob = json.dumps({"v": 1, "sha256": digest}, separators=(",", ":")).encode()
    return BRIDGE_PREFIX + base64.urlsafe_b64encode(blob).decode().rstrip("=")


def wrap(provider: str, signature: str) -> str:
    """A signature an upstream issued, as the client gets it: the provider's name travels with
    it, so a replay can go back to that provider and to no other."""
    name = base64.urlsafe_b64encode(provider.encode()).decode().rstrip("=")
    return f"{ENVELOPE_PREFIX}{name}.{signature}"


def unwrap(signature: str, provider: str) -> str | None:
    """The original signature when ``signature`` is an envelope from ``provider``, else None
    (ours, another provider's, a Codex ``encrypted_content``, a client-made value)."""
    if not signature.startswith(ENVELOPE_PREFIX):
        return None
    name, dot, original = signature[len(ENVELOPE_PREFIX) :].partition(".")
    if not dot or not original:
        return None
    try:
        owner = base64.urlsafe_b64decode(name + "=" * (-len(name) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    return original if owner == provider else None


def for_anthropic_upstream(request: Request, provider: str) -> tuple[Request, int]:
    """Keep only the thinking parts that ``provider`` signed itself (unwrapped, byte for byte);
    drop every other one: a signature from elsewhere (SGLang's ``dummy-signature``, another
    Anthropic account, a Codex ``encrypted_content``, ours) makes an official upstream refuse
    the request. Returns the request and how many parts were dropped."""
    dropped = 0
    changed = False
    messages: list[Message] = []
    for message in request.messages:
        if not any(isinstance(p, ThinkingPart) for p in message.parts):
            messages.append(message)
            continue
        changed = True
        kept: list[Part] = []
        for part in message.parts:
            if isinstance(part, ThinkingPart):
                original = unwrap(part.signature, provider)
                if original is None:
                    dropped += 1
                    continue
                part = ThinkingPart(part.text, original)
            kept.append(part)
        if kept:
            messages.append(Message(role=message.role, parts=tuple(kept)))
    if not changed:
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


def strip_thinking(request: Request) -> Request:
    """``request`` without any thinking part: the retry after an upstream refused a signature
    it should have accepted (a rotated key, another account behind the same name)."""
    messages: list[Message] = []
    for message in request.messages:
        parts = tuple(p for p in message.parts if not isinstance(p, ThinkingPart))
        if parts:
            messages.append(Message(role=message.role, parts=parts))
    return replace(request, messages=tuple(messages))


def tool_turn_unthought(request: Request) -> bool:
    """The last assistant message calls a tool but carries no thinking: with thinking on, an
    Anthropic upstream requires that message to start with a signed thinking block."""
    for message in reversed(request.messages):
        if message.role == "assistant":
            parts = message.parts
            calls = any(isinstance(p, ToolCallPart) for p in parts)
            return calls and not any(isinstance(p, ThinkingPart) for p in parts)
    return False


def names_signature(message: str) -> bool:
    """An upstream 400 that refused a thinking signature (Anthropic: "Invalid `signature` in
    `thinking` block")."""
    lowered = message.lower()
    return "signature" in lowered and "thinking" in lowered
