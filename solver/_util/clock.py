"""The one clock: UTC datetimes, the record time format, and durations between two records."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["record_time", "seconds_between", "utc_now", "utc_stamp"]


def utc_now() -> datetime:
    return datetime.now(UTC)


def record_time(when: datetime | None = None) -> str:
    """RFC 3339 UTC with microseconds and a ``Z``: the time format of every record."""
    return (when or utc_now()).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def utc_stamp(when: datetime | None = None) -> str:
    """The compact stamp used in run-directory names: ``20260101T120000Z``."""
    return (when or utc_now()).strftime("%Y%m%dT%H%M%SZ")


def seconds_between(start: str, end: str) -> float:
    """Seconds from one record time to another; 0 when either is missing or they are out of
    order (clocks of two hosts may disagree a little)."""
    if not start or not end:
        return 0.0
    a = datetime.fromisoformat(start.replace("Z", "+00:00"))
    b = datetime.fromisoformat(end.replace("Z", "+00:00"))
    return max((b - a).total_seconds(), 0.0)
