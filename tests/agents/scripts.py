"""What the scripted upstream answers, and the offline environment each CLI runs in."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from solver.testing import RecordedRequest


def base_env(home: Path) -> dict[str, str]:
    """Only what a CLI needs: no key of the user's, no proxy setting, HOME in the test."""
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "TERM") if k in os.environ}
    return {**keep, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "NO_COLOR": "1"}


def last_message(request: RecordedRequest) -> dict[str, Any]:
    messages = request.json.get("messages") or []
    return messages[-1] if messages else {}


def tool_results(request: RecordedRequest) -> list[str]:
    """The tool outputs the client sent back (Chat upstream: ``role: tool`` messages)."""
    return [
        str(m.get("content")) for m in request.json.get("messages") or [] if m.get("role") == "tool"
    ]


def user_text(request: RecordedRequest) -> str:
    """All user text of a Chat request, to pick the scripted answer by content."""
    out = []
    for message in request.json.get("messages") or []:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [p.get("text", "") for p in content if isinstance(p, dict)]
    return "\n".join(out)


def tool_names(request: RecordedRequest) -> list[str]:
    return [t["function"]["name"] for t in request.json.get("tools") or []]


def jsonl(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out
