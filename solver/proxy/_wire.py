"""Small byte-level helpers shared by the three front emitters: JSON text, SSE frames, ids."""

from __future__ import annotations

import os
from typing import Any

import orjson

from solver._util.ids import uuid7 as uuid7


def dumps(value: Any) -> str:
    """Compact JSON; U+2028/U+2029 are escaped so line-splitting clients keep frames whole (E43)."""
    text = orjson.dumps(value).decode()
    if "\u2028" in text or "\u2029" in text:
        text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return text


def json_str(text: str) -> str:
    return dumps(text)


_LS, _PS = "\u2028".encode(), "\u2029".encode()


def json_bytes(text: str) -> bytes:
    """A JSON string literal for ``text`` as bytes: the hot path of every delta."""
    data = orjson.dumps(text)
    # isascii() is a flag of the string, not a scan: an ASCII text holds neither separator
    if not text.isascii() and (_LS in data or _PS in data):
        data = data.replace(_LS, b"\\u2028").replace(_PS, b"\\u2029")
    return data


def sse_event(name: str, payload: str) -> bytes:
    return f"event: {name}\ndata: {payload}\n\n".encode()


def sse_data(payload: str) -> bytes:
    return f"data: {payload}\n\n".encode()


KEEPALIVE_COMMENT = b": keepalive\n\n"
DONE = b"data: [DONE]\n\n"


def short_id(prefix: str) -> str:
    return prefix + os.urandom(12).hex()
