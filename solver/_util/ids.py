"""Time-ordered ids: UUIDv7 (RFC 9562), so ids sort by when they were made."""

from __future__ import annotations

import os
import time
import uuid

__all__ = ["uuid7"]

_RANDOM_BITS = (1 << 80) - 1


def uuid7() -> str:
    """48 bits of Unix milliseconds, the version and variant, the rest random (Python 3.11
    has no ``uuid.uuid7``)."""
    millis = time.time_ns() // 1_000_000
    value = (millis & ((1 << 48) - 1)) << 80
    value |= int.from_bytes(os.urandom(10), "big") & _RANDOM_BITS
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    return str(uuid.UUID(int=value))
