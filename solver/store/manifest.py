"""MANIFEST.json: the run's immutable description, written once, atomically, as canonical
JSON. Its digest (SHA-256 of the file's bytes) is the ``prev`` of journal record 0."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from solver._util.clock import record_time as utc_now
from solver._util.ids import uuid7
from solver.store._fs import canonical_json, sha256_tag

FORMAT = "solver-run/2"
# Every format this store reads; it writes a run in the format the run was created with.
FORMATS = {"solver-run/1": 1, "solver-run/2": 2}
MASK = "***"
# Whole-word key names only: "tokenizer_sha256" or "max_tokens" are not secrets.
_SECRET_KEY = re.compile(
    r"(?:^|[_-])(?:api[_-]?key|secret|client[_-]?secret|password|passwd|token|authorization|"
    r"private[_-]?key)$",
    re.IGNORECASE,
)


TIME_PATTERN = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")


def is_secret_key(key: str) -> bool:
    """Whether a value under ``key`` is a secret the store masks."""
    return _SECRET_KEY.search(key) is not None


def mask_secrets(value: Any) -> Any:
    """A copy with every non-empty string under a secret-looking key replaced by ``***``:
    the manifest is shared with whoever audits the run, and keys must never reach it."""
    if isinstance(value, Mapping):
        masked: dict[str, Any] = {}
        for key, item in value.items():
            if isinstance(item, str) and item and _SECRET_KEY.search(str(key)):
                masked[str(key)] = MASK
            else:
                masked[str(key)] = mask_secrets(item)
        return masked
    if isinstance(value, list | tuple):
        return [mask_secrets(item) for item in value]
    return value


def prepare_manifest(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest as written: secrets masked, ``format``, ``run_id`` and ``created``
    filled in when the caller left them out."""
    prepared: dict[str, Any] = mask_secrets(manifest)
    prepared.setdefault("format", FORMAT)
    prepared.setdefault("run_id", uuid7())
    prepared.setdefault("created", utc_now())
    return prepared


def manifest_bytes(manifest: Mapping[str, Any]) -> bytes:
    return canonical_json(manifest)


def manifest_digest(data: bytes) -> str:
    return sha256_tag(data)


def parse_manifest(data: bytes) -> dict[str, Any]:
    """MANIFEST.json's content; ValueError when it is not a JSON object of our format."""
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    except RecursionError:
        raise ValueError("not JSON (nested too deeply)") from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    if obj.get("format") not in FORMATS:
        known = ", ".join(repr(name) for name in FORMATS)
        raise ValueError(f"format is {obj.get('format')!r}, expected one of {known}")
    return obj


def format_version(manifest: Mapping[str, Any]) -> int:
    """1 or 2: the format a parsed manifest declares."""
    return FORMATS[str(manifest.get("format"))]
