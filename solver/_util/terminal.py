"""Untrusted text made safe to print: control and escape characters shown, not sent to the
terminal; error texts as one bounded line. Imports nothing of the project."""

from __future__ import annotations

import re

# C0 and C1 controls except tab and newline, DEL, and the bidi overrides that reorder text.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def visible(text: str) -> str:
    """``text`` with every control or escape character shown as ``\\xNN`` / ``\\uNNNN``, so
    problem or model text printed on a terminal cannot move the cursor, retitle the window,
    clear the screen or write the clipboard (OSC 52). Tabs and newlines are kept."""

    def show(match: re.Match[str]) -> str:
        code = ord(match.group(0))
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _CONTROL.sub(show, text)


def one_line(text: str, limit: int = 500) -> str:
    """An error text as one visible line of at most ``limit`` characters."""
    flat = " ".join(visible(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


_JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def json_visible(text: str) -> str:
    """JSON text (``json.dumps`` output, which escapes C0 controls already) with DEL, the C1
    controls and bidi overrides escaped as ``\\uXXXX`` too: still the same JSON value, but
    nothing in it acts on a terminal."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)
