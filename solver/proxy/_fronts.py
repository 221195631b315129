"""The three front protocols behind one interface, so the exchange engine knows none of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from solver.wire import Usage

from ._parse import FrontRequest
from ._turn import Block, TurnEnd, TurnFailure, TurnSink
from ._wire import short_id
from .fronts import anthropic, chat, responses


class Emitter(TurnSink, Protocol):
    started: bool
    ended: bool

    def take(self) -> bytes: ...

    def start(self, usage: Usage) -> None: ...

    def keepalive(self) -> bytes: ...

    def finish(self, end: TurnEnd) -> None: ...

    def fail(self, failure: TurnFailure) -> None: ...


@dataclass(frozen=True, slots=True)
class Front:
    name: str
    tool_id_prefix: str
    parse: Callable[[bytes, dict[str, str]], FrontRequest]
    new_id: Callable[[], str]
    emitter: Callable[[FrontRequest, str], Emitter]
    render: Callable[[FrontRequest, str, Emitter, list[Block], TurnEnd], dict[str, Any]]
    error_body: Callable[[int, str], dict[str, Any]]
    failure_status: Callable[[TurnFailure], int]


def _anthropic_render(
    fr: FrontRequest, ident: str, emitter: Emitter, blocks: list[Block], end: TurnEnd
) -> dict[str, Any]:
    return anthropic.render_message(ident, fr.client_model, blocks, end, fr.request.stop)


def _chat_render(
    fr: FrontRequest, ident: str, emitter: Emitter, blocks: list[Block], end: TurnEnd
) -> dict[str, Any]:
    return chat.render_completion(ident, fr.client_model, blocks, end)


def _responses_render(
    fr: FrontRequest, ident: str, emitter: Emitter, blocks: list[Block], end: TurnEnd
) -> dict[str, Any]:
    assert isinstance(emitter, responses.ResponsesStream)
    return emitter.final_response(end)


def _responses_failure_status(failure: TurnFailure) -> int:
    return chat.failure_status(failure)


ANTHROPIC = Front(
    name="anthropic",
    tool_id_prefix="toolu_",
    parse=anthropic.parse_messages,
    new_id=lambda: short_id("msg_"),
    emitter=lambda fr, ident: anthropic.AnthropicStream(ident, fr.client_model, fr.request.stop),
    render=_anthropic_render,
    error_body=anthropic.error_body,
    failure_status=anthropic.failure_status,
)

CHAT = Front(
    name="chat",
    tool_id_prefix="call_",
    parse=chat.parse_chat,
    new_id=lambda: short_id("chatcmpl-"),
    emitter=lambda fr, ident: chat.ChatStream(ident, fr.client_model, fr.include_usage),
    render=_chat_render,
    error_body=lambda status, message: chat.error_body(status, message),
    failure_status=chat.failure_status,
)

RESPONSES = Front(
    name="responses",
    tool_id_prefix="call_",
    parse=responses.parse_responses,
    new_id=lambda: short_id("resp_"),
    emitter=lambda fr, ident: responses.ResponsesStream(
        ident, fr.client_model, fr.custom_tools, fr.echo, fr.namespaced
    ),
    render=_responses_render,
    error_body=lambda status, message: responses.error_body(status, message),
    failure_status=_responses_failure_status,
)
