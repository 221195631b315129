"""Tool names for OpenAI-style upstreams, which refuse names over 64 characters (b2).
Claude Code's MCP tools (``mcp__server__tool``) often are longer. A long name is sent as
its first 55 characters, ``_`` and 8 hex digits of its SHA-256, the same every time, so the
history of earlier calls maps the same way; names coming back are restored."""

from __future__ import annotations

import hashlib
from dataclasses import replace

from solver.wire import Message, Request, StreamEvent, ToolCallDelta, ToolCallPart

LIMIT = 64


def short_name(name: str) -> str:
    if len(name) <= LIMIT:
        return name
    return f"{name[:55]}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def shorten(request: Request) -> tuple[Request, dict[str, str]]:
    """The request with long tool names shortened, and the map back (empty: nothing to do)."""
    names = {t.name for t in request.tools} | {
        p.name for m in request.messages for p in m.parts if isinstance(p, ToolCallPart)
    }
    back = {short_name(n): n for n in names if len(n) > LIMIT}
    if not back:
        return request, {}
    tools = tuple(replace(t, name=short_name(t.name)) for t in request.tools)
    messages = tuple(
        Message(
            role=m.role,
            parts=tuple(
                replace(p, name=short_name(p.name)) if isinstance(p, ToolCallPart) else p
                for p in m.parts
            ),
        )
        for m in request.messages
    )
    return replace(request, tools=tools, messages=messages), back


def restore(events: list[StreamEvent], back: dict[str, str]) -> list[StreamEvent]:
    return [
        replace(e, name=back.get(e.name, e.name)) if isinstance(e, ToolCallDelta) and e.name else e
        for e in events
    ]
