"""A model client that answers in-process: the loop's ModelClient seam without HTTP.

:class:`ScriptedClient` takes the same responders as :class:`FakeEndpoint` (a function of the
request, or a strict list of replies), encodes each reply into the exact bytes the fake server
would send (``fake_wire``), and hands them to the observer and the stream decoder the way
:class:`ModelClient` does: ``AttemptStart`` with the encoded request body before anything else,
a ``Connection`` per pooled connection (a loopback peer on the endpoint's port, so the audit's
network check judges it like a real one), the raw bytes into the sink, canonical events, then
``AttemptEnd`` with the usage, SHA-256 and size. The journal of a run on it therefore holds the
records a run over HTTP holds, and the audit re-derives and checks them the same way.

What it does not do: deadlines, retries and HTTP faults (``Reply.fault``, ``raw_chunks`` are
refused). Those are the transport's subject and stay with the FakeEndpoint tests.

An optional ``pace`` coroutine runs between the request and the response; the policy lab uses
it to hold each call for its virtual GPU time.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from typing import Protocol

from solver._util.ids import uuid7 as new_request_id
from solver.llm import (
    AttemptEnd,
    AttemptObserver,
    AttemptStart,
    Completion,
    Connection,
    Endpoint,
    ModelClient,
    Request,
    ServerInfo,
    Usage,
    host_port,
)
from solver.testing import fake_wire as wire
from solver.testing.fake_endpoint import RecordedRequest, Reply, Responder
from solver.wire import Folder, StreamDecoder, encode_request

__all__ = ["Pacer", "ScriptedClient"]

_PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "anthropic": "/v1/messages"}


class Pacer(Protocol):
    """Holds a call between its request and its response (the lab's virtual GPU time)."""

    async def hold(self, request: RecordedRequest, reply: Reply, tokens: tuple[int, int]) -> None:
        """Return when the call's response is due; ``tokens`` is (prompt, completion)."""
        ...

    def cut(self, request: RecordedRequest) -> Usage:
        """What a call cancelled while held had spent by then."""
        ...


class ScriptedClient(ModelClient):
    """``async with ScriptedClient(endpoint, responder)``; a drop-in :class:`ModelClient`."""

    def __init__(
        self,
        endpoint: Endpoint,
        responder: Responder | list[Reply],
        *,
        served_model: str = "glm-fake",
        context_length: int | None = 131072,
        on_connect: Callable[[Connection], None] | None = None,
        pace: Pacer | None = None,
        thinking_budget: bool = False,
    ) -> None:
        """``thinking_budget``: answer the probe as SGLang taking a thinking-budget
        processor, so requests with a budget carry it (off: the probe's bytes stay as
        they were)."""
        super().__init__(endpoint, on_connect=on_connect)
        self.thinking_budget = thinking_budget
        self._responder = responder
        self._script = list(responder) if isinstance(responder, list) else None
        self.served_model = served_model
        self.context_length = context_length
        self.pace = pace
        self.requests: list[RecordedRequest] = []
        self._host, self._port = host_port(endpoint.base_url)
        self._pool = 0  # connections opened so far (keep-alive: reused when idle)
        self._busy = 0  # attempts in progress

    async def __aenter__(self) -> ScriptedClient:
        return self

    async def aclose(self) -> None:
        return None

    def _peer(self) -> Connection:
        # The endpoint of a test or the lab is on loopback; the peer is what a socket reports.
        address = "127.0.0.1" if self._host in ("localhost", "127.0.0.1") else self._host
        return Connection(host=self._host, port=self._port, address=f"{address}:{self._port}")

    async def probe(self, observer: AttemptObserver | None = None) -> ServerInfo:
        # an SGLang server with --enable-custom-logit-processor, as the serve recipes start
        model: dict[str, object] = {"id": self.served_model, "object": "model"}
        if self.thinking_budget:
            model["owned_by"] = "sglang"
        if self.context_length is not None:
            model["max_model_len"] = self.context_length
        raw = json.dumps({"object": "list", "data": [model]}).encode()
        if self._pool == 0:
            self._pool = 1
            report = observer.connection_opened if observer is not None else self._on_connect
            if report is not None:
                report(self._peer())
        info = ServerInfo(
            models=(self.served_model,),
            context_length=self.context_length,
            raw=raw,
            url=self.endpoint.api_root + "/models",
            server="sglang" if self.thinking_budget else None,
            custom_logit_processor=True if self.thinking_budget else None,
        )
        self._server = info
        self._probed = True
        return info

    def _reply(self, request: RecordedRequest) -> Reply:
        if self._script is not None:
            if not self._script:
                raise AssertionError("ScriptedClient: the script has no reply left")
            return self._script.pop(0)
        assert callable(self._responder)
        return self._responder(request)

    async def complete(self, request: Request, observer: AttemptObserver) -> Completion:
        effective, cap = await self._outgoing(request, observer)
        api = self.endpoint.api
        body = encode_request(api, effective)
        request_id = new_request_id()
        start = AttemptStart(
            call_attempt=1,
            request_id=request_id,
            url=self.url,
            request=effective,
            body=body,
            max_tokens_cap=cap,
        )
        sink = observer.attempt_started(start)
        self._busy += 1
        if self._busy > self._pool:  # no idle connection: the pool opens one
            self._pool += 1
            observer.connection_opened(self._peer())
        recorded = RecordedRequest(
            api=api,
            path=_PATHS[api],
            headers={"x-request-id": request_id},
            body=body,
            json=json.loads(body),
        )
        self.requests.append(recorded)
        folder = Folder(reasoning=effective.reasoning)
        decoder = StreamDecoder(api, reasoning=effective.reasoning)
        hasher = hashlib.sha256()
        size = 0
        failure: str | None = None
        spent = Usage()
        try:
            reply = self._reply(recorded)
            if reply.fault is not None or reply.raw_chunks is not None:
                raise ValueError("ScriptedClient does not play faults; use FakeEndpoint")
            prompt_chars = len(recorded.system_text) + len(recorded.user_text)
            tokens = wire.usage_of(reply, prompt_chars)
            if self.pace is not None:
                await self.pace.hold(recorded, reply, tokens)
            frames = _frames(recorded, reply, self.served_model, request_id, prompt_chars)
            for data in frames:
                sink.write(data)
                hasher.update(data)
                size += len(data)
                for event in decoder.feed(data) if recorded.stream else ():
                    folder.add(event)
                    observer.on_event(event)
            tail = decoder.close() if recorded.stream else decoder.body(b"".join(frames))
            for event in tail:
                folder.add(event)
                observer.on_event(event)
            return folder.completion()
        except asyncio.CancelledError:
            failure = "cancelled"
            spent = self.pace.cut(recorded) if self.pace is not None else Usage()
            raise
        except BaseException:
            failure = "local"
            raise
        finally:
            self._busy -= 1
            usage = folder.usage if failure is None else spent
            observer.attempt_ended(
                start,
                AttemptEnd(
                    request_id=request_id,
                    server_request_id=None,
                    status=200 if failure is None else None,
                    ttfb_s=0.0,
                    ttft_s=0.0,
                    total_s=0.0,
                    usage=usage,
                    output_tokens_per_s=None,
                    finish_reason=folder.finish.reason if folder.finish is not None else None,
                    retry_index=0,
                    error_kind=failure,
                    error_message=None if failure is None else failure,
                    retryable=False,
                    normalised_cases=tuple(sorted(decoder.cases)),
                    response_sha256=hasher.hexdigest(),
                    response_bytes=size,
                ),
            )


def _frames(
    recorded: RecordedRequest, reply: Reply, model: str, rid: str, prompt_chars: int
) -> list[bytes]:
    """The bytes FakeEndpoint would send for this reply (its ``_answer``, without faults)."""
    api = recorded.api
    if not recorded.stream:
        maker = {
            "chat": wire.chat_body,
            "responses": wire.responses_body,
            "anthropic": wire.anthropic_body,
        }[api]
        obj = maker(reply, rid=rid, model=model, prompt_chars=prompt_chars)
        return [json.dumps(obj, separators=(",", ":")).encode()]
    if api == "chat":
        options = recorded.json.get("stream_options") or {}
        return wire.chat_stream(
            reply,
            rid=rid,
            model=model,
            prompt_chars=prompt_chars,
            usage=bool(options.get("include_usage")),
        )
    if api == "responses":
        return wire.responses_stream(reply, rid=rid, model=model, prompt_chars=prompt_chars)
    return wire.anthropic_stream(reply, rid=rid, model=model, prompt_chars=prompt_chars)
