"""The journal: ``journal.jsonl``, one canonical JSON record a line, hash-chained.

Each line is ``{"data":{..},"prev":"sha256:..","seq":N,"sess":S,"t":"..Z","type":"..","v":V}``
(canonical JSON, then ``\\n``). A line's hash is SHA-256 of its bytes without the newline;
the next record stores it as ``prev``. Record 0's ``prev`` is the digest of MANIFEST.json.
This module parses and checks; :mod:`solver.store.run` appends.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import orjson

RECORD_KEYS = frozenset({"data", "prev", "seq", "sess", "t", "type", "v"})


@dataclass(frozen=True, slots=True)
class Record:
    """One journal line, parsed. ``line_hash`` is ``"sha256:<hex>"`` of the line's bytes."""

    seq: int
    t: str
    type: str
    v: int
    sess: int
    data: dict[str, Any]
    prev: str
    line_hash: str


@dataclass(frozen=True, slots=True)
class ChainBreak:
    """A place where the journal is not a valid chain. ``line`` is 1-based."""

    line: int
    seq: int | None
    reason: str


@dataclass(frozen=True, slots=True)
class TornTail:
    """Bytes at the end of the journal that are not a complete record: a write cut short."""

    offset: int
    data: bytes


@dataclass(frozen=True, slots=True)
class JournalScan:
    records: list[Record]
    breaks: list[ChainBreak]
    torn: TornTail | None
    good_size: int  # bytes up to the end of the last complete line (before a torn tail)


def line_hash(line: bytes) -> str:
    return "sha256:" + hashlib.sha256(line).hexdigest()


def parse_line(line: bytes) -> Record:
    """A journal line (without its newline) as a Record; ValueError names what is wrong."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        # orjson is strict where the standard library is not (integers beyond 64 bits,
        # escaped lone surrogates): let json decide, so both read exactly what we write.
        try:
            obj = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    if obj.keys() != RECORD_KEYS:
        missing = sorted(RECORD_KEYS - obj.keys())
        extra = sorted(obj.keys() - RECORD_KEYS)
        raise ValueError(f"wrong fields (missing {missing}, unexpected {extra})")
    # type() rather than isinstance(): JSON true/false must not pass for integers.
    if not (
        type(obj["seq"]) is int
        and type(obj["v"]) is int
        and type(obj["sess"]) is int
        and type(obj["t"]) is str
        and type(obj["type"]) is str
        and type(obj["prev"]) is str
    ):
        raise ValueError("seq, v, sess must be integers and t, type, prev strings")
    if type(obj["data"]) is not dict:
        raise ValueError("data is not an object")
    return Record(
        obj["seq"],
        obj["t"],
        obj["type"],
        obj["v"],
        obj["sess"],
        obj["data"],
        obj["prev"],
        "sha256:" + hashlib.sha256(line).hexdigest(),
    )


def find_torn_tail(data: bytes) -> TornTail | None:
    """A journal's torn tail: bytes after the last newline, or a last line that is not a
    record (a crash may leave zeros where the filesystem had not yet written the data)."""
    if not data:
        return None
    if not data.endswith(b"\n"):
        start = data.rfind(b"\n") + 1
        return TornTail(start, data[start:])
    start = data.rfind(b"\n", 0, len(data) - 1) + 1
    try:
        parse_line(data[start:-1])
    except ValueError:
        return TornTail(start, data[start:])
    return None


def scan_journal(data: bytes, genesis: str) -> JournalScan:
    """Parse every complete line and check the chain: contiguous seq from 0, and each
    ``prev`` equal to the hash of the line before it (``genesis`` for the first)."""
    torn = find_torn_tail(data)
    good_size = torn.offset if torn is not None else len(data)
    lines = data[:good_size].split(b"\n")[:-1] if good_size else []
    records: list[Record] = []
    breaks: list[ChainBreak] = []
    expected_prev = genesis
    expected_seq = 0
    for number, line in enumerate(lines, start=1):
        try:
            record = parse_line(line)
        except ValueError as exc:
            breaks.append(ChainBreak(number, None, f"line {number} is not a record: {exc}"))
            expected_prev = line_hash(line)
            expected_seq += 1
            continue
        problems = []
        if record.seq != expected_seq:
            problems.append(
                f"seq {record.seq} where {expected_seq} was expected (a record was removed, "
                "inserted, duplicated or reordered)"
            )
        if record.prev != expected_prev:
            before = "MANIFEST.json" if number == 1 else f"line {number - 1}"
            problems.append(
                f"prev does not match the hash of {before} (that line was altered, or lines "
                "were removed, inserted or reordered)"
            )
        if problems:
            breaks.append(ChainBreak(number, record.seq, "; ".join(problems)))
        records.append(record)
        expected_prev = record.line_hash
        expected_seq = record.seq + 1
    return JournalScan(records, breaks, torn, good_size)
