"""One streamed Chat Completions call with the timing the canary and the benchmark need.

Deliberately small and separate from ``solver.llm``: the benchmark must time every chunk with
as little work per chunk as possible, and the canary must see the raw deltas (reasoning,
content, tool-call fragments) exactly as the server sent them.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class ToolCallAccumulator:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class StreamResult:
    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCallAccumulator] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    status: int | None = None
    error: str | None = None
    started: float = 0.0  # perf_counter at send
    first_token: float | None = None  # first content, reasoning or tool-call delta
    ended: float = 0.0
    token_times: list[float] = field(default_factory=list)  # one per delta-bearing chunk

    @property
    def ok(self) -> bool:
        return self.error is None and self.finish_reason is not None

    @property
    def output_tokens(self) -> int:
        """Server-reported completion tokens, else the number of delta-bearing chunks."""
        if self.usage and isinstance(self.usage.get("completion_tokens"), int):
            return int(self.usage["completion_tokens"])
        return len(self.token_times)

    @property
    def text(self) -> str:
        return self.reasoning + self.content


def chat_url(base_url: str) -> str:
    """``http://host:port`` or ``.../v1`` -> the chat completions URL."""
    base = base_url.rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    return base + "/chat/completions"


async def stream_chat(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], *, timeout: float
) -> StreamResult:
    """POST ``body`` (``stream`` forced on, usage requested) and fold the SSE stream."""
    payload = {**body, "stream": True, "stream_options": {"include_usage": True}}
    result = StreamResult(started=time.perf_counter())
    try:
        async with client.stream("POST", url, json=payload, timeout=timeout) as response:
            result.status = response.status_code
            if response.status_code != 200:
                text = (await response.aread()).decode(errors="replace")
                result.error = f"HTTP {response.status_code}: {text[:200]}"
                return result
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                _fold(result, data, time.perf_counter())
    except httpx.HTTPError as exc:
        result.error = f"{type(exc).__name__}: {exc}"[:300]
    finally:
        result.ended = time.perf_counter()
    return result


def _fold(result: StreamResult, data: str, now: float) -> None:
    try:
        chunk = json.loads(data)
    except ValueError:
        result.error = f"malformed SSE data: {data[:80]!r}"
        return
    if not isinstance(chunk, dict):
        return
    if chunk.get("error"):
        result.error = f"in-stream error: {str(chunk['error'])[:200]}"
        return
    if isinstance(chunk.get("usage"), dict):
        result.usage = chunk["usage"]
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        got = False
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning:
            result.reasoning += reasoning
            got = True
        if delta.get("content"):
            result.content += delta["content"]
            got = True
        for call in delta.get("tool_calls") or []:
            index = int(call.get("index", 0))
            while len(result.tool_calls) <= index:
                result.tool_calls.append(ToolCallAccumulator())
            slot = result.tool_calls[index]
            slot.id = call.get("id") or slot.id
            function = call.get("function") or {}
            slot.name = function.get("name") or slot.name
            slot.arguments += function.get("arguments") or ""
            got = True
        if got:
            if result.first_token is None:
                result.first_token = now
            result.token_times.append(now)
        if choice.get("finish_reason"):
            result.finish_reason = str(choice["finish_reason"])
