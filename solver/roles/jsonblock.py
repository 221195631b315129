"""Finding the JSON object a role's template asks for in free-form model output.

GLM-style output wraps the object in a ```json fence, or writes it plainly after some prose, or
writes LaTeX inside JSON strings with single backslashes (``"\\frac"`` is then a form feed and
``"\\("`` is invalid JSON). The search prefers the last fenced block, then the last plain object,
and repairs the backslashes it can.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from solver.roles.proof import strip_thinking

_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript|js)?[ \t]*\n(.*?)```", re.DOTALL)
_INVALID_ESCAPE = re.compile(r'\\(?=[^"\\/bfnrtu])|\\(?=u(?![0-9a-fA-F]{4}))')
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")

# Bounds that keep parsing linear-ish on adversarial or very long text.
_MAX_FENCES = 50
_MAX_PLAIN_ATTEMPTS = 200
_MAX_OBJECT_CHARS = 200_000
_MAX_REPAIR_ATTEMPTS = 20
_OBJECT_START = re.compile(r'\{\s*"')


def _restore_latex(value: Any) -> Any:
    """Form feed and backspace never belong in mathematical prose: they are ``\\f``/``\\b``
    of ``\\frac``/``\\beta`` that JSON decoding turned into control characters."""
    if isinstance(value, str):
        return value.replace("\f", "\\f").replace("\b", "\\b")
    if isinstance(value, list):
        return [_restore_latex(item) for item in value]
    if isinstance(value, dict):
        return {key: _restore_latex(item) for key, item in value.items()}
    return value


def loads_tolerant(text: str) -> Any:
    """json.loads, then again with invalid escapes doubled and trailing commas removed.
    Raises ValueError when neither works."""
    if len(text) > _MAX_OBJECT_CHARS:
        raise ValueError("JSON block too long")
    try:
        return _restore_latex(json.loads(text))
    except (ValueError, RecursionError):
        pass
    repaired = _TRAILING_COMMA.sub(r"\1", _INVALID_ESCAPE.sub(r"\\\\", text))
    try:
        return _restore_latex(json.loads(repaired))
    except (ValueError, RecursionError) as exc:
        raise ValueError(str(exc)) from None


def _plain_objects(text: str) -> list[Any]:
    """Objects written without a fence, found from the end of the text backwards."""
    found: list[Any] = []
    decoder = json.JSONDecoder()
    position = len(text)
    attempts = 0
    while attempts < _MAX_PLAIN_ATTEMPTS:
        position = text.rfind("{", 0, position)
        if position < 0:
            break
        attempts += 1
        try:
            value, _end = decoder.raw_decode(text, position)
        except (ValueError, RecursionError):
            continue
        found.append(_restore_latex(value))
    return found


def find_object(text: str, accept: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
    """The last JSON object in ``text`` (fenced first, then plain) that ``accept`` takes."""
    visible = strip_thinking(text)
    fences = _FENCE.findall(visible)[-_MAX_FENCES:]
    for block in reversed(fences):
        try:
            value = loads_tolerant(block.strip())
        except ValueError:
            continue
        if isinstance(value, dict) and accept(value):
            return value
    for value in _plain_objects(visible):
        if isinstance(value, dict) and accept(value):
            return value
    # Last resort: an object whose escapes need repair to decode (LaTeX in strings). Only
    # positions that look like the start of an object ("{" then a quoted key) are tried.
    end = visible.rfind("}")
    starts = [m.start() for m in _OBJECT_START.finditer(visible, max(0, end - _MAX_OBJECT_CHARS))]
    for start in reversed(starts[-_MAX_REPAIR_ATTEMPTS:]):
        if start >= end:
            continue
        try:
            value = loads_tolerant(visible[start : end + 1])
        except ValueError:
            continue
        if isinstance(value, dict) and accept(value):
            return value
    return None


def lower_keys(value: dict[str, Any]) -> dict[str, Any]:
    """Keys folded to lower case with spaces and dashes as underscores."""
    return {str(k).strip().lower().replace(" ", "_").replace("-", "_"): v for k, v in value.items()}
