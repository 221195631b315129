"""System messages inside the conversation (Claude Code's mid-conversation-system beta), as each
upstream protocol can take them.

- Anthropic: passed through in place, with the beta that allows them (:data:`MID_SYSTEM_BETA`).
- Responses: in place, as a ``system`` message item, which the Responses API accepts anywhere.
- Chat: in place as user text inside ``<system-reminder>`` tags (the form Claude Code itself
  uses for instructions inside a user turn), joined to the neighbouring user turn: many Chat
  templates (GLM, Qwen) refuse a system turn after the first message, and some refuse two user
  turns in a row.
"""

from __future__ import annotations

from dataclasses import replace

from solver.wire import Api, Message, Part, Request, TextPart

MID_SYSTEM_BETA = "mid-conversation-system-2026-04-07"


def has_mid_system(request: Request) -> bool:
    """A system message after the first non-system message."""
    seen_other = False
    for message in request.messages:
        if message.role != "system":
            seen_other = True
        elif seen_other:
            return True
    return False


def _reminder(text: str) -> TextPart:
    return TextPart(f"<system-reminder>\n{text}\n</system-reminder>")


def _as_user_text(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    out: list[Message] = []
    pending: list[Part] = []  # reminders waiting for the next user turn
    for index, message in enumerate(messages):
        if message.role == "system" and index > 0:
            if out and out[-1].role == "user":
                reminder = _reminder(message.plain_text())
                out[-1] = Message(role="user", parts=(*out[-1].parts, reminder))
            else:
                pending.append(_reminder(message.plain_text()))
            continue
        if pending and message.role == "user":
            message = Message(role="user", parts=(*pending, *message.parts))
            pending = []
        elif pending and message.role == "assistant":  # after tool results, never between
            out.append(Message(role="user", parts=tuple(pending)))
            pending = []
        out.append(message)
    if pending:
        out.append(Message(role="user", parts=tuple(pending)))
    return tuple(out)


def for_upstream(request: Request, api: Api, cases: list[str]) -> Request:
    """``request`` as an ``api`` upstream takes it; a change is noted in ``cases``."""
    if api != "chat" or not has_mid_system(request):
        return request
    cases.append("system_mid_as_user")
    return replace(request, messages=_as_user_text(request.messages))
