"""Request ids: UUIDv7 (time-ordered, RFC 9562), so ids sort by when the attempt started."""

from __future__ import annotations

import os
import time
import uuid

__all__ = ["new_request_id"]


def new_request_id() -> str:
    millis = time.time_ns() // 1_000_000
    value = (millis & ((1 << 48) - 1)) << 80
    value |= int.from_bytes(os.urandom(10), "big") & ((1 << 80) - 1)
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    return str(uuid.UUID(int=value))
