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

from solver.store._fs import canonical_json
from solver.store.errors import StoreError

# canonical_json's settings, built once: json.dumps makes a new encoder on every call.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)
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
    """A place where the journal is not a valid chain. ``line`` counts from 0, as ``seq``
    does (line n should hold seq n)."""

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
    offsets: list[int]  # byte offset at which each complete line starts, by line number


def line_hash(line: bytes) -> str:
    return "sha256:" + hashlib.sha256(line).hexdigest()


def _decode(line: bytes) -> Any:
    """The JSON value of a line, read leniently (the strict rules are checked after)."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        # orjson is strict where the standard library is not (integers beyond 64 bits,
        # escaped lone surrogates, NaN): let json decide, so the canonical check below
        # names what is wrong instead of a parse error.
        try:
            return json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not JSON ({exc})") from None


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {key!r}")
        seen[key] = value
    return seen


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _strict_decode(line: bytes) -> Any:
    """The line read by the standard library (exact integers of any size), refusing duplicate
    keys and NaN/Infinity, and checked to re-serialise to exactly its bytes; ValueError names
    the first rule it breaks."""
    obj = json.loads(line, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant)
    try:
        canonical = canonical_json(obj)
    except StoreError as exc:
        raise ValueError(str(exc)) from None
    if canonical != line:
        raise ValueError(
            "not canonical JSON (keys unsorted, whitespace, escapes or number form differ)"
        )
    return obj


def parse_line(line: bytes) -> Record:
    """A journal line (without its newline) as a Record; ValueError names what is wrong.

    Strict: the line must be exactly the canonical JSON of what it parses to (re-serialised
    and compared), so duplicate keys, NaN or Infinity, and any other spelling of the same
    value are refused and every verifier reads one line one way."""
    try:
        obj = _decode(line)
        try:
            canonical = _CANONICAL.encode(obj).encode("utf-8") == line
        except (TypeError, ValueError):  # NaN or Infinity (read by the fallback parser)
            canonical = False
        if not canonical:
            # orjson reads integers beyond 64 bits as floats: the standard library decides.
            obj = _strict_decode(line)
    except RecursionError:  # a hostile line nested 100,000 deep
        raise ValueError("not a record: nested too deeply") from None
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
    """A journal's torn tail: bytes after the last newline, or a last line that is not JSON
    at all (a crash may leave zeros where the filesystem had not yet written the data). A
    last line that is JSON was written whole: if it breaks a rule it is damage, not a tear."""
    if not data:
        return None
    if not data.endswith(b"\n"):
        start = data.rfind(b"\n") + 1
        return TornTail(start, data[start:])
    start = data.rfind(b"\n", 0, len(data) - 1) + 1
    try:
        _decode(data[start:-1])
    except ValueError:
        return TornTail(start, data[start:])
    except RecursionError:
        return None  # JSON too deep to read, written whole: damage (scan_journal says so)
    return None


def scan_journal(data: bytes, genesis: str) -> JournalScan:
    """Parse every complete line and check the chain: contiguous seq from 0, and each
    ``prev`` equal to the hash of the line before it (``genesis`` for the first)."""
    torn = find_torn_tail(data)
    good_size = torn.offset if torn is not None else len(data)
    lines = data[:good_size].split(b"\n")[:-1] if good_size else []
    records: list[Record] = []
    breaks: list[ChainBreak] = []
    offsets: list[int] = []
    position = 0
    expected_prev = genesis
    expected_seq = 0
    for number, line in enumerate(lines):
        offsets.append(position)
        position += len(line) + 1
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
            before = "MANIFEST.json" if number == 0 else f"line {number - 1}"
            problems.append(
                f"prev does not match the hash of {before} (that line was altered, or lines "
                "were removed, inserted or reordered)"
            )
        if problems:
            breaks.append(ChainBreak(number, record.seq, "; ".join(problems)))
        records.append(record)
        expected_prev = record.line_hash
        expected_seq = record.seq + 1
    return JournalScan(records, breaks, torn, good_size, offsets)
