"""Shared pieces of the proxy tests: a fake upstream behind the proxy, and the real SDKs as
clients, each read to the end and folded into one comparable :class:`Seen`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import openai

from solver.proxy import Provider, ProxyConfig, ProxyDeadlines, ProxyServer
from solver.testing import FakeEndpoint
from solver.testing.fake_endpoint import Reply

FRONTS = ("anthropic", "chat", "responses")
UPSTREAMS = ("chat", "responses", "anthropic")
TOOLS_A = [
    {
        "name": "get_weather",
        "description": "weather of a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
TOOLS_C = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "weather of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
TOOLS_R = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]


@dataclass
class Seen:
    """What a client saw, in one shape whatever its protocol."""

    text: str = ""
    thinking: str = ""
    tools: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    stop: str = ""
    input_tokens: int = 0  # total, cached included
    cached_tokens: int = 0
    output_tokens: int = 0


@contextmanager
def proxied(
    responder: Any,
    api: str = "chat",
    *,
    deadlines: ProxyDeadlines | None = None,
    telemetry: Path | None = None,
    second: Any = None,
    token: str = "",
    split_think: bool | None = None,
) -> Iterator[tuple[FakeEndpoint, ProxyServer]]:
    """A fake upstream speaking ``api`` behind a proxy (and a second fake for failover)."""
    with FakeEndpoint(responder) as fake, FakeEndpoint(second or []) as backup:
        providers = [
            Provider("fake", fake.url + "/v1", api, split_think=split_think)  # type: ignore[arg-type]
        ]
        if second is not None:
            providers.append(Provider("backup", backup.url + "/v1", api))  # type: ignore[arg-type]
        config = ProxyConfig(
            providers=tuple(providers),
            active="fake",
            host="127.0.0.1",
            port=0,
            token=token,
            deadlines=deadlines or ProxyDeadlines(),
            telemetry=telemetry,
        )
        with ProxyServer(config) as proxy:
            proxy.backup = backup  # type: ignore[attr-defined]
            yield fake, proxy


def anthropic_client(proxy: ProxyServer, timeout: float = 30) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0, timeout=timeout)


def openai_client(proxy: ProxyServer, timeout: float = 30) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key="k", max_retries=0, timeout=timeout)


_A_STOP = {"end_turn": "stop", "max_tokens": "length", "tool_use": "tool_calls"}


def _from_anthropic(message: Any) -> Seen:
    seen = Seen(stop=_A_STOP.get(message.stop_reason, message.stop_reason))
    for block in message.content:
        if block.type == "text":
            seen.text += block.text
        elif block.type == "thinking":
            seen.thinking += block.thinking
            assert block.signature, "a thinking block must carry a signature (E25)"
        elif block.type == "tool_use":
            seen.tools.append((block.id, block.name, dict(block.input)))
    usage = message.usage
    cached = usage.cache_read_input_tokens or 0
    seen.input_tokens = usage.input_tokens + cached + (usage.cache_creation_input_tokens or 0)
    seen.cached_tokens = cached
    seen.output_tokens = usage.output_tokens
    return seen


def _from_responses(response: Any) -> Seen:
    seen = Seen()
    called = False
    for item in response.output:
        if item.type == "message":
            seen.text += "".join(c.text for c in item.content if c.type == "output_text")
        elif item.type == "reasoning":
            seen.thinking += "".join(s.text for s in item.summary)
        elif item.type == "function_call":
            called = True
            assert item.call_id, "call_id must be non-empty (E47)"
            seen.tools.append((item.call_id, item.name, json.loads(item.arguments or "{}")))
    if response.status == "completed":
        seen.stop = "tool_calls" if called else "stop"
    elif response.status == "incomplete":
        reason = response.incomplete_details.reason
        seen.stop = "length" if reason == "max_output_tokens" else reason
    else:
        seen.stop = response.status
    usage = response.usage
    if usage is not None:
        seen.input_tokens = usage.input_tokens
        seen.cached_tokens = usage.input_tokens_details.cached_tokens
        seen.output_tokens = usage.output_tokens
    return seen


def _from_chat_message(message: Any, finish: str, usage: Any) -> Seen:
    seen = Seen(text=message.content or "", stop=finish)
    extra = message.model_extra or {}
    seen.thinking = extra.get("reasoning_content") or ""
    for call in message.tool_calls or []:
        seen.tools.append((call.id, call.function.name, json.loads(call.function.arguments)))
    if usage is not None:
        seen.input_tokens = usage.prompt_tokens
        details = usage.prompt_tokens_details
        seen.cached_tokens = (details.cached_tokens or 0) if details else 0
        seen.output_tokens = usage.completion_tokens
    return seen


def ask(
    front: str,
    proxy: ProxyServer,
    *,
    stream: bool,
    user: str = "hi",
    tools: bool = True,
    max_tokens: int = 512,
    timeout: float = 30,
) -> Seen:
    """One request through the real SDK of ``front``, read to the end."""
    if front == "anthropic":
        client = anthropic_client(proxy, timeout)
        kwargs: dict[str, Any] = {
            "model": "glm",
            "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": user}],
        }
        if tools:
            kwargs["tools"] = TOOLS_A
        if stream:
            with client.messages.stream(**kwargs) as events:
                for _ in events:
                    pass
                return _from_anthropic(events.get_final_message())
        return _from_anthropic(client.messages.create(**kwargs))
    oai = openai_client(proxy, timeout)
    if front == "responses":
        rkwargs: dict[str, Any] = {"model": "glm", "input": user, "max_output_tokens": max_tokens}
        if tools:
            rkwargs["tools"] = TOOLS_R
        if stream:
            with oai.responses.stream(**rkwargs) as events:
                terminal = None
                for event in events:
                    if event.type in ("response.incomplete", "response.failed"):
                        terminal = event.response
                if terminal is not None:  # the helper only finalises completed responses
                    return _from_responses(terminal)
                return _from_responses(events.get_final_response())
        return _from_responses(oai.responses.create(**rkwargs))
    ckwargs: dict[str, Any] = {
        "model": "glm",
        "messages": [{"role": "user", "content": user}],
        "max_tokens": max_tokens,
    }
    if tools:
        ckwargs["tools"] = TOOLS_C
    if stream:
        reasoning: list[str] = []
        with oai.chat.completions.stream(**ckwargs, stream_options={"include_usage": True}) as s:
            for event in s:
                if event.type == "chunk" and event.chunk.choices:
                    delta = event.chunk.choices[0].delta
                    reasoning.append((delta.model_extra or {}).get("reasoning_content") or "")
            try:
                final = s.get_final_completion()
            except openai.LengthFinishReasonError as exc:  # the helper refuses to parse these
                final = exc.completion
        choice = final.choices[0]
        seen = _from_chat_message(choice.message, choice.finish_reason, final.usage)
        seen.thinking = "".join(reasoning)
        return seen
    completion = oai.chat.completions.create(**ckwargs)
    choice = completion.choices[0]
    return _from_chat_message(choice.message, choice.finish_reason, completion.usage)


def by_user_text(replies: dict[str, Reply]) -> Callable[[Any], Reply]:
    """A content-based responder: the reply is chosen by the user's text."""

    def respond(request: Any) -> Reply:
        return replies[request.user_text]

    return respond
