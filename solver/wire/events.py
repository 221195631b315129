"""Canonical request and stream events, independent of any wire protocol.

Every codec (Chat Completions, Responses, Anthropic Messages) encodes a :class:`Request` and
decodes its stream into these events; the proxy encodes them back into any front protocol.
Values are frozen dataclasses: they are created per chunk on the hot path, so they stay small.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
Api = Literal["chat", "responses", "anthropic"]

# Canonical finish reasons. Each codec maps its protocol's reasons onto these (b3):
# stop (natural end or stop sequence), length (max_tokens), tool_calls, content_filter,
# abort (the server aborted the request), error (the stream carried an error object).
FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "abort", "error"]


# ---------------------------------------------------------------- request side


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image given either inline (base64 ``data`` with ``media_type``) or by ``url``."""

    media_type: str = ""
    data: str = ""
    url: str = ""
    type: Literal["image"] = "image"


@dataclass(frozen=True, slots=True)
class ThinkingPart:
    """Reasoning of an earlier assistant turn. ``signature`` is an Anthropic thinking signature;
    it is only valid for the provider that issued it and must never be sent elsewhere."""

    text: str
    signature: str = ""
    type: Literal["thinking"] = "thinking"


@dataclass(frozen=True, slots=True)
class ToolCallPart:
    """A complete tool call made by the assistant; ``arguments`` is a JSON text."""

    id: str
    name: str
    arguments: str
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class ToolResultPart:
    tool_call_id: str
    content: str
    is_error: bool = False
    type: Literal["tool_result"] = "tool_result"


Part = TextPart | ImagePart | ThinkingPart | ToolCallPart | ToolResultPart


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    parts: tuple[Part, ...]

    @staticmethod
    def text(role: Role, text: str) -> Message:
        return Message(role=role, parts=(TextPart(text),))

    def plain_text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Request:
    """What a caller wants from a model, in no particular protocol.

    ``reasoning`` None leaves the server default; True/False asks for thinking on/off in the
    protocol's own way. ``extra`` is merged into the encoded body last (server extensions such
    as llama.cpp's ``cache_prompt``); it is part of the recorded request like everything else.
    ``thinking_budget`` is what the caller asks for (reasoning tokens before the answer); the
    client turns it into the server's own fields in ``extra`` where the server takes them
    (:mod:`solver.wire.thinking`) and drops it where it does not, so it never reaches a body
    by itself. ``min_tokens`` is the fewest output tokens the call may be capped to where the
    served context is short: below it the client does not send the call
    (:class:`~solver.wire.errors.ContextBelowFloor`). It is the client's own bound, never
    sent nor recorded (:func:`~solver.wire.codec.request_params` leaves it out); 1 lets any
    cap of at least one token start the call (a prompt that fills the context leaves none).
    ``max_tokens_setting`` is the role's ``max_tokens`` before any cap (None: ``max_tokens``
    is the setting): the thinking budget keeps the answer the room that setting left under
    whatever cap the call ends with. Like ``min_tokens`` it is never sent nor recorded.
    """

    model: str
    messages: tuple[Message, ...]
    max_tokens: int
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    reasoning: bool | None = None
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: Literal["auto", "none", "required"] | None = None
    stream: bool = True
    extra: tuple[tuple[str, Any], ...] = field(default_factory=tuple)
    thinking_budget: int | None = None
    min_tokens: int = 1
    max_tokens_setting: int | None = None


# ---------------------------------------------------------------- stream side


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str
    type: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True, slots=True)
class ReasoningSignature:
    """Anthropic's signature for the thinking block just streamed."""

    signature: str
    type: Literal["reasoning_signature"] = "reasoning_signature"


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of tool call ``index``. ``id`` and ``name`` may arrive late or only once;
    ``arguments`` fragments concatenate to the JSON arguments text."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts with one meaning whatever the protocol (b4):
    ``input_tokens`` includes cached tokens; ``output_tokens`` includes reasoning tokens."""

    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    type: Literal["usage"] = "usage"


@dataclass(frozen=True, slots=True)
class Finish:
    reason: FinishReason
    raw_reason: str = ""
    #: the stop string that ended the output, when the server names it (SGLang's
    #: ``matched_stop``, Anthropic's ``stop_sequence``)
    stop_sequence: str | None = None
    type: Literal["finish"] = "finish"


@dataclass(frozen=True, slots=True)
class StreamError:
    """The stream itself reported or revealed a failure (an error object inside a 200 stream,
    EOF without a finish, malformed data). ``retryable`` says whether asking again may help."""

    kind: str
    message: str
    retryable: bool = False
    status: int | None = None
    type: Literal["error"] = "error"


StreamEvent = (
    ReasoningDelta | ReasoningSignature | TextDelta | ToolCallDelta | Usage | Finish | StreamError
)


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Completion:
    """A whole response folded from its events."""

    text: str
    reasoning: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    finish_reason: FinishReason
    raw_finish_reason: str = ""
    reasoning_signature: str = ""
