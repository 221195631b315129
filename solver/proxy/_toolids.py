"""Tool call ids for Anthropic (b2): ``tool_use.id`` must match ``^[a-zA-Z0-9_-]+$``,
but OpenAI-style servers send ids such as ``functions.Bash:0`` (GLM, Kimi). An id outside that
alphabet is sent as ``olyt_`` and its base64url, which is the reverse map itself: the id comes
back in the client's history and is decoded before it goes to any other upstream, so each
server sees its own ids, and the proxy keeps no state between requests."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import replace

from solver.wire import Message, Part, Request, ToolCallPart, ToolResultPart

PREFIX = "olyt_"
_SAFE = re.compile(r"[A-Za-z0-9_-]+")


def for_anthropic(tool_id: str) -> str:
    if _SAFE.fullmatch(tool_id):
        return tool_id
    return PREFIX + base64.urlsafe_b64encode(tool_id.encode()).decode().rstrip("=")


def original(tool_id: str) -> str:
    """The id an upstream issued, for one that :func:`for_anthropic` rewrote; else unchanged."""
    if not tool_id.startswith(PREFIX):
        return tool_id
    blob = tool_id[len(PREFIX) :]
    try:
        decoded = base64.urlsafe_b64decode(blob + "=" * (-len(blob) % 4)).decode()
    except (binascii.Error, ValueError):
        return tool_id
    # only ids this module made decode: a round trip proves it (a client's own olyt_ id stays)
    return decoded if for_anthropic(decoded) == tool_id else tool_id


def _map(part: Part, anthropic: bool) -> Part:
    if isinstance(part, ToolCallPart):
        new = original(part.id)
        new = for_anthropic(new) if anthropic else new
        return part if new == part.id else replace(part, id=new)
    if isinstance(part, ToolResultPart):
        new = original(part.tool_call_id)
        new = for_anthropic(new) if anthropic else new
        return part if new == part.tool_call_id else replace(part, tool_call_id=new)
    return part


def for_upstream(request: Request, anthropic: bool) -> tuple[Request, bool]:
    """Every tool id in the history as this upstream should see it: decoded to the issuer's
    id, then made Anthropic-safe for an Anthropic upstream. Returns whether any id changed."""
    changed = False
    messages: list[Message] = []
    for message in request.messages:
        parts = tuple(_map(p, anthropic) for p in message.parts)
        if any(a is not b for a, b in zip(parts, message.parts, strict=True)):
            changed = True
            message = Message(role=message.role, parts=parts)
        messages.append(message)
    return (replace(request, messages=tuple(messages)), True) if changed else (request, False)
