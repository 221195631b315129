"""What the sandbox tests share."""

from __future__ import annotations

import os
from pathlib import Path


def survivors(marker: str) -> list[int]:
    """Host pids of processes whose argv[0] is ``marker`` (the tests' sleeping processes)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if cmdline.startswith(marker.encode() + b"\0"):
            found.append(int(entry))
    return found
