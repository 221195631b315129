"""Shared pieces of the three request parsers: the front request value, the 4xx error, typed
field access with one-line messages, and the history clean-ups every protocol needs."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import orjson

from solver.errors import InputError
from solver.wire import ImagePart, Message, Part, Request, TextPart, ToolSpec

# A front that omits a token limit still gets a generous one: GLM reasoning spends thousands of
# tokens before the answer, and servers default to ~4k (E23).
DEFAULT_MAX_TOKENS = 32768
MAX_BODY_BYTES = 64 * 1024 * 1024
# A session id is a label for telemetry and routing, not content: kept to this many characters.
MAX_SESSION_ID_CHARS = 200


class FrontError(InputError):
    """A request the proxy refuses; rendered as a 4xx (or upstream-derived) error in the
    client's own protocol. ``kind`` is the protocol-neutral label kept in telemetry."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind


@dataclass(frozen=True, slots=True)
class FrontRequest:
    """A client request in canonical form, plus what the front needs to answer it."""

    request: Request
    stream: bool
    client_model: str
    include_usage: bool = False
    custom_tools: frozenset[str] = frozenset()
    # Responses namespaces: the qualified name upstream -> (namespace, name) for the client
    namespaced: dict[str, tuple[str, str]] = field(default_factory=dict)
    session_id: str = ""
    cases: tuple[str, ...] = ()
    echo: dict[str, Any] = field(default_factory=dict)


def fail(message: str, status: int = 400) -> NoReturn:
    raise FrontError(status, message)


def load_object(body: bytes) -> dict[str, Any]:
    if len(body) > MAX_BODY_BYTES:
        raise FrontError(413, f"request body is larger than {MAX_BODY_BYTES} bytes", "too_large")
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        fail(f"request body is not valid JSON: {exc}")
    if not isinstance(value, dict):
        fail("request body must be a JSON object")
    return value


def get_str(obj: dict[str, Any], key: str, where: str, *, default: str | None = None) -> str:
    value = obj.get(key, default)
    if value is None:
        fail(f"{where}.{key} is required")
    if not isinstance(value, str):
        fail(f"{where}.{key} must be a string")
    return value


def get_list(obj: dict[str, Any], key: str, where: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        fail(f"{where}.{key} must be an array")
    return value


def get_dict(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        fail(f"{where} must be an object")
    return value


def get_int(obj: dict[str, Any], key: str, where: str, *, minimum: int = 0) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        fail(f"{where}.{key} must be an integer")
    if value < minimum:
        fail(f"{where}.{key} must be >= {minimum}")
    return value


def get_float(obj: dict[str, Any], key: str, where: str) -> float | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        fail(f"{where}.{key} must be a number")
    if value != value or value in (float("inf"), float("-inf")):
        fail(f"{where}.{key} must be finite")
    return float(value)


def get_bool(obj: dict[str, Any], key: str, where: str) -> bool | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        fail(f"{where}.{key} must be a boolean")
    return value


def stop_list(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return tuple(value)
    fail(f"{where} must be a string or an array of strings")


def content_parts(
    content: Any, where: str, part: Callable[[dict[str, Any], str], Part]
) -> list[Part]:
    """A message's content in the OpenAI shape: absent, a string, or an array of typed parts,
    each turned into a :class:`Part` by the protocol's own ``part(raw, where)``."""
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)]
    if not isinstance(content, list):
        fail(f"{where} must be a string or an array of parts")
    return [part(get_dict(raw, f"{where}[{i}]"), f"{where}[{i}]") for i, raw in enumerate(content)]


def keyword_choice(choice: str, named: str) -> str:
    """An OpenAI ``tool_choice`` given as a word; ``named`` says what else it may be."""
    if choice not in ("auto", "none", "required"):
        fail(f"body.tool_choice must be auto, none, required or {named}")
    return choice


def session_id(*candidates: Any) -> str:
    """The first non-empty string of ``candidates`` (headers, then body fields), bounded."""
    for value in candidates:
        if isinstance(value, str) and value:
            return value[:MAX_SESSION_ID_CHARS]
    return ""


def image_from_url(url: str, where: str) -> ImagePart:
    """``data:`` URLs become inline base64 images; others stay URLs."""
    if url.startswith("data:"):
        head, sep, data = url[5:].partition(",")
        if not sep or not head.endswith(";base64"):
            fail(f"{where} must be a base64 data URL or an http(s) URL")
        return ImagePart(media_type=head[: -len(";base64")] or "image/png", data=data)
    if not url.startswith(("http://", "https://")):
        fail(f"{where} must be a base64 data URL or an http(s) URL")
    return ImagePart(url=url)


def tool_spec(name: Any, description: Any, parameters: Any, where: str) -> ToolSpec:
    if not isinstance(name, str) or not name:
        fail(f"{where}.name must be a non-empty string")
    if description is not None and not isinstance(description, str):
        fail(f"{where}.description must be a string")
    if parameters is None:
        parameters = {"type": "object", "properties": {}}
    if not isinstance(parameters, dict):
        fail(f"{where} parameters must be a JSON Schema object")
    return ToolSpec(name=name, description=description or "", parameters=parameters)


def arguments_text(value: Any, where: str) -> str:
    """Tool arguments as JSON text, whatever shape the client used."""
    if value is None:
        return "{}"
    if isinstance(value, str):
        return value or "{}"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    fail(f"{where} must be a JSON object or a JSON text")


def collapse_system(
    messages: list[Message], leading: list[str], cases: list[str]
) -> tuple[Message, ...]:
    """One leading system message: GLM chat templates reject system turns mid-conversation."""
    system = list(leading)
    rest: list[Message] = []
    for message in messages:
        if message.role == "system":
            if rest:
                cases.append("system_collapsed")
            system.append(message.plain_text())
        else:
            rest.append(message)
    head = [Message.text("system", "\n\n".join(s for s in system if s))] if any(system) else []
    return tuple(head + rest)


def lead_system(
    messages: list[Message], leading: list[str], cases: list[str]
) -> tuple[Message, ...]:
    """The top-level system text and any system messages before the first other message as one
    leading system message; later system messages stay where the client put them."""
    system = list(leading)
    rest: list[Message] = []
    for message in messages:
        if message.role == "system" and not rest:
            system.append(message.plain_text())
        else:
            rest.append(message)
    if any(m.role == "system" for m in rest):
        cases.append("system_mid_conversation")
    head = [Message.text("system", "\n\n".join(s for s in system if s))] if any(system) else []
    return tuple(head + rest)


def select_tool(
    tools: tuple[ToolSpec, ...], name: str, where: str
) -> tuple[tuple[ToolSpec, ...], str]:
    """A forced specific tool is expressed canonically as "only this tool, and required"."""
    chosen = tuple(t for t in tools if t.name == name)
    if not chosen:
        fail(f"{where} names tool {name!r}, which is not in tools")
    return chosen, "required"


def text_parts(parts: list[Part]) -> tuple[Part, ...]:
    """Drop empty text parts (E13): replaying them makes Anthropic answer 400."""
    return tuple(p for p in parts if not (isinstance(p, TextPart) and not p.text))
