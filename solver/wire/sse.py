"""Incremental Server-Sent Events framing over raw bytes (E42-E44, docs/stream-cases.md).

Bytes are split into events before any decoding, so a UTF-8 character split across network
reads is never decoded in halves. Lines end at ``\\r\\n``, ``\\n`` or ``\\r`` only (never at
U+2028 and friends, E43); one optional space after the colon is stripped; several ``data:``
lines join with ``\\n``; comment lines (``: keep-alive``) are skipped.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["SSEDecoder", "loads_payload"]

SSEEvent = tuple[str | None, bytes]


class SSEDecoder:
    """Feed raw bytes, get complete ``(event name or None, data bytes)`` pairs.

    Linear in the bytes fed: a read that completes no event is only appended (an event of
    many megabytes arrives in many reads; re-joining the buffer on each would be quadratic)."""

    __slots__ = ("_cr", "_parts", "_size")

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._size = 0
        self._cr = False  # a trailing "\r" held back: it may be the first half of "\r\n"

    def feed(self, data: bytes) -> list[SSEEvent]:
        if self._cr:
            data, self._cr = b"\r" + data, False
        if b"\r" in data:
            if data.endswith(b"\r"):
                data, self._cr = data[:-1], True
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if not data:
            return []
        parts = self._parts
        # a one-byte search (memchr) first: the two-byte one runs at a tenth of its speed, and
        # the reads of a large event hold no newline at all (JSON escapes its own)
        boundary = (b"\n" in data and b"\n\n" in data) or (
            parts and data[:1] == b"\n" and parts[-1][-1:] == b"\n"
        )
        if not boundary:
            parts.append(data)
            self._size += len(data)
            return []
        buffer = b"".join([*parts, data]) if parts else data
        end = buffer.rfind(b"\n\n")
        rest = buffer[end + 2 :]
        self._parts = [rest] if rest else []
        self._size = len(rest)
        # blocks are cut out of the buffer by position: a block of megabytes is copied once
        out: list[SSEEvent] = []
        pos = 0
        while pos < end:
            # the block ends at the first blank line; when its first newline is that end, the
            # block is one line (found with one-byte searches only, see above)
            stop = buffer.find(b"\n", pos, end + 2)
            one_line = buffer[stop + 1] == 0x0A
            if not one_line:
                stop = buffer.find(b"\n\n", stop + 1, end + 2)
            # the fast path: one "data: ..." line, which is nearly every chunk of every server
            if one_line and buffer.startswith(b"data: ", pos):
                out.append((None, buffer[pos + 6 : stop]))
            elif stop > pos:
                event = _parse_block(buffer[pos:stop])
                if event is not None:
                    out.append(event)
            pos = stop + 2
        return out

    def close(self) -> list[SSEEvent]:
        """At EOF: an unterminated last event is still delivered (lenient, some servers end
        with ``data: [DONE]\\n``)."""
        rest = b"".join(self._parts).strip(b"\n")
        self._parts, self._size, self._cr = [], 0, False
        if not rest:
            return []
        return [e for b in rest.split(b"\n\n") if (e := _parse_block(b)) is not None]

    @property
    def pending(self) -> int:
        """Bytes held back waiting for the end of an event."""
        return self._size


def _parse_block(block: bytes) -> SSEEvent | None:
    event: str | None = None
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line[0] == 0x3A:  # empty, or a ":" comment
            continue
        name, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            data.append(value)
        elif name == b"event":
            event = value.decode("utf-8", "replace")
    if not data:
        return None
    return event, b"\n".join(data)


def loads_payload(data: bytes) -> list[Any]:
    """The JSON values in one ``data`` field: normally one, several when a server concatenated
    objects without a blank line (E44). Raises ``ValueError`` on anything else."""
    try:
        return [orjson.loads(data)]
    except orjson.JSONDecodeError:
        pass
    text = data.decode("utf-8")
    decoder = json.JSONDecoder()
    values: list[Any] = []
    position = 0
    while position < len(text):
        while position < len(text) and text[position] in " \t\r\n":
            position += 1
        if position == len(text):
            break
        try:
            value, position = decoder.raw_decode(text, position)
        except RecursionError:
            # orjson refuses deep nesting with JSONDecodeError; the stdlib parser recurses
            raise ValueError("JSON nested too deeply") from None
        values.append(value)
    if not values:
        raise ValueError("empty data field")
    return values
