"""One client request through the proxy: attempts over providers, liveness, the answer.

Liveness, all always on (case codes: docs/stream-cases.md):

- the upstream gets a first-byte deadline scaled by the prompt size (long prefill sends no
  byte, E38), then an idle deadline between reads (E09), and a wall-clock cap;
- a stream is opened to the client at the first model output, or after ``open_after`` seconds
  of upstream silence, whichever comes first; from then on, while the upstream deadline still
  holds, a keepalive (Anthropic ``ping`` or an SSE comment) goes out after ``keepalive``
  seconds of silence; pings stop the moment the upstream deadline passes (E39);
- when a deadline passes or the upstream dies, the client gets a protocol-correct error, never
  silence and never a fake success;
- a client disconnect closes the upstream response at once, freeing the model's slot (E40);
- failover to the next provider happens only while no model output reached the client.

The upstream deadlines of an attempt are the model client's :class:`solver.wire.Watchdog` (one
timer that re-arms itself; the per-chunk path costs a float store); a heartbeat task per
streamed request opens the stream and sends the keepalives.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from starlette.types import Receive, Send

from solver.wire import Deadlines as AttemptDeadlines
from solver.wire import (
    ReasoningSignature,
    StreamDecoder,
    StreamEvent,
    Usage,
    Watchdog,
    split_orphan_think,
)

from . import _upstream
from ._config import Provider
from ._fronts import Emitter, Front
from ._http1 import Http1Error, Http1Response
from ._parse import FrontError, FrontRequest
from ._signature import names_signature, wrap
from ._state import ProxyState
from ._telemetry import RequestRecord
from ._toolnames import restore
from ._turn import Block, TurnEnd, TurnFailure, TurnState
from ._wire import dumps
from ._writer import StreamWriter


class _Abort(Exception):
    pass


_draining: set[asyncio.Task[None]] = set()
_FIRST_SLICE = 1024
# The most bytes of one JSON answer read from an upstream (E20), and of one stream (a
# 256k-token answer a token an event is about 100 MB); a stream's events are also bounded
# one by one in the decoder (MAX_EVENT_BYTES).
MAX_UPSTREAM_BODY = 64 * 1024 * 1024
MAX_UPSTREAM_STREAM = 512 * 1024 * 1024


async def _drain(response: Http1Response, rest: AsyncIterator[bytes]) -> None:
    """Read the little that follows a protocol terminal (the chunked-body end) so the upstream
    connection goes back to the pool instead of being reset; bounded, off the client's path."""
    try:
        async with asyncio.timeout(2.0):
            async for _ in rest:
                pass
    except (TimeoutError, Http1Error):
        pass
    finally:
        await response.aclose()


def _split_blocks(blocks: list[Block]) -> list[Block]:
    """A JSON answer whose first text holds a lone ``</think>`` (and no thinking came): what
    precedes the tag is thinking (b1). The live hold normally did this already; this catches
    text the hold let through, so a JSON answer never shows the tag."""
    if not blocks or blocks[0].kind != "text" or any(b.kind == "thinking" for b in blocks):
        return blocks
    text, reasoning = split_orphan_think(blocks[0].text, "")
    if not reasoning:
        return blocks
    thinking = Block(0, "thinking")
    thinking.parts.append(reasoning)
    out = [thinking]
    if text:
        answer = Block(1, "text")
        answer.parts.append(text)
        out.append(answer)
    for block in blocks[1:]:
        block.index = len(out)
        out.append(block)
    return out


def _drain_later(response: Http1Response, rest: AsyncIterator[bytes]) -> None:
    task = asyncio.get_running_loop().create_task(_drain(response, rest))
    _draining.add(task)
    task.add_done_callback(_draining.discard)


# the Watchdog's names for its deadlines -> the failure kinds of the proxy
_DEADLINES = {
    "first_byte": "first_byte_timeout",
    "idle": "idle_timeout",
    "total": "total_timeout",
    "grace": "finish_grace",
}
_ABORT_MESSAGES = {
    "first_byte_timeout": "upstream sent no byte within the first-byte deadline",
    "idle_timeout": "upstream went silent past the idle deadline",
    "total_timeout": "the request exceeded the proxy's wall-clock limit",
    "client_cancel": "the client went away",
}


class Exchange:
    def __init__(
        self,
        state: ProxyState,
        front: Front,
        fr: FrontRequest,
        send: Send,
        receive: Receive,
        record: RequestRecord,
        response_headers: list[tuple[bytes, bytes]],
    ) -> None:
        self.state = state
        self.front = front
        self.fr = fr
        self._send = send
        self._receive = receive
        self.record = record
        self._headers = response_headers
        self._loop = asyncio.get_running_loop()
        self._t0 = self._loop.time()
        self._ident = front.new_id()
        self.emitter: Emitter = front.emitter(fr, self._ident)
        self._writer = StreamWriter(send, response_headers, lambda: self.abort("client_cancel"))
        self._json_sent = False
        self._watch: Watchdog | None = None  # the deadlines of the attempt in flight
        self._abort = ""  # the client went away: ends everything
        self._estimate = 0
        self._deadline = self._t0 + state.config.deadlines.max_wall
        self._cases: set[str] = set(fr.cases)
        self._tool_names: dict[str, str] = {}
        self._split_think = False
        self._decoder: StreamDecoder | None = None

    # ------------------------------------------------------------ output

    async def _json(
        self, status: int, body: dict[str, Any], retry_after: float | None = None
    ) -> None:
        headers = [(b"content-type", b"application/json"), *self._headers]
        if retry_after is not None:
            headers.append((b"retry-after", b"%d" % max(1, round(retry_after))))
        self._json_sent = True
        await self._send({"type": "http.response.start", "status": status, "headers": headers})
        await self._send(
            {"type": "http.response.body", "body": dumps(body).encode(), "more_body": False}
        )
        self.record.http_status = status

    async def _close_stream(self, final: bytes) -> None:
        """Send the last bytes. A client that stopped reading but keeps the connection open
        gets the idle deadline, like a silent upstream; then it is dropped."""
        try:
            async with asyncio.timeout(self.state.config.deadlines.idle):
                await self._writer.close(final)
        except TimeoutError:
            self._writer.cancel()
            raise _Abort() from None

    def _commit(self) -> None:
        """Open the client stream (message_start / response.created / role chunk)."""
        if not self.emitter.started:
            self.emitter.start(Usage(input_tokens=self._estimate))

    # ------------------------------------------------------------ liveness

    def abort(self, reason: str) -> None:
        """The client went away: end the attempt in flight and everything after it."""
        self._abort = reason
        if self._watch is not None:
            self._watch.expire(reason)

    async def _heartbeat(self) -> None:
        """A streamed request: open the client stream at ``open_after`` seconds of upstream
        silence, then ping after ``keepalive`` seconds without a write, but only while the
        upstream deadline of the attempt holds (E39: pings must not mask a dead upstream)."""
        limits = self.state.config.deadlines
        writer = self._writer
        while not self.emitter.ended:
            now = self._loop.time()
            wake = now + limits.keepalive
            if not self.emitter.started:
                open_at = self._t0 + limits.open_after
                if now >= open_at:
                    self._commit()
                    writer.push(self.emitter.take())
                else:
                    wake = open_at
            if self.emitter.started:
                ping_at = writer.last_write + limits.keepalive
                watch = self._watch
                if now >= ping_at:
                    if writer.idle and watch is not None and now < watch.due:
                        writer.push(self.emitter.keepalive())
                        self.record.pings += 1
                        self.state.metrics.pings += 1
                        ping_at = now + limits.keepalive
                    else:
                        ping_at = now + min(limits.keepalive, 0.05)  # look again soon
                wake = min(wake, ping_at)
            await asyncio.sleep(max(wake - self._loop.time(), 0.005))

    async def _listen(self) -> None:
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self.abort("client_cancel")
                return

    # ------------------------------------------------------------ attempts

    async def run(self, providers: list[Provider]) -> None:
        self._estimate = max(1, sum(len(m.plain_text()) for m in self.fr.request.messages) // 4)
        heartbeat = asyncio.create_task(self._heartbeat()) if self.fr.stream else None
        listener = asyncio.create_task(self._listen())
        outcome: TurnEnd | TurnFailure | None = None
        turn: TurnState | None = None
        try:
            down = self.state.breaker.all_down([p.name for p in providers])
            if down is not None:
                # every provider let its first-byte deadline pass moments ago: say so now
                why, wait = down
                self._cases.add("all_providers_down")
                outcome = TurnFailure(
                    "upstream_down",
                    f"no provider for {self.fr.client_model!r} is answering ({why}); "
                    f"retry in {wait:.0f}s",
                    status=503,
                    retryable=True,
                    retry_after=wait,
                )
                providers = []
                turn = self._new_turn()
            for number, provider in enumerate(providers):
                if number:
                    self.state.metrics.failovers += 1
                    self._cases.add("failover")
                self.record.attempts = number + 1
                self.record.provider = provider.name
                turn = self._new_turn()
                outcome = await self._attempt(provider, turn)
                if self._signature_refused(provider, outcome, turn):
                    turn = self._new_turn()  # once, same provider: no output went out yet
                    outcome = await self._attempt(provider, turn, strip_thinking=True)
                if isinstance(outcome, TurnEnd):
                    self.state.breaker.success(provider.name)
                elif outcome.retryable and not turn.output_started and not self._abort:
                    self.state.breaker.failure(provider.name, outcome.retry_after)
                    if outcome.kind == "first_byte_timeout":
                        self.state.breaker.down(provider.name, outcome.message)
                again = (
                    isinstance(outcome, TurnFailure)
                    and outcome.retryable
                    and not turn.output_started
                    and not self._abort
                )
                if not again:
                    break
            assert outcome is not None and turn is not None
            await self._conclude(outcome, turn)
        except FrontError as exc:
            await self._refuse(exc.status, exc.message)
            self.record.status, self.record.error = "bad_request", exc.message[:300]
        except (OSError, _Abort):
            # the client went away (E40); the upstream response is already closed
            self.record.status = "client_cancel"
            self._cases.add("E40_client_cancel")
        finally:
            if heartbeat is not None:
                heartbeat.cancel()
            listener.cancel()
            self._writer.cancel()
            self._finish_record(turn)

    def _new_turn(self) -> TurnState:
        return TurnState(
            self.emitter, self.front.tool_id_prefix, self._commit if self.fr.stream else None
        )

    def _signature_refused(
        self, provider: Provider, outcome: TurnEnd | TurnFailure, turn: TurnState
    ) -> bool:
        """An Anthropic upstream answered 400 naming a thinking signature, before any output."""
        return (
            isinstance(outcome, TurnFailure)
            and provider.api == "anthropic"
            and outcome.status == 400
            and not turn.output_started
            and not self._abort
            and names_signature(outcome.message)
        )

    async def _attempt(
        self, provider: Provider, turn: TurnState, *, strip_thinking: bool = False
    ) -> TurnEnd | TurnFailure:
        request, cases, self._tool_names = _upstream.upstream_request(
            self.fr.request, provider, strip_thinking=strip_thinking
        )
        self._cases.update(cases)
        self.record.upstream_model = request.model
        body = _upstream.encode(provider, request)
        # a lone </think> (b1): hold the text if the client asked for thinking, or, with
        # split_think (GLM thinks by default), unless it said no; else it streams at once
        asked, split = self.fr.request.reasoning, provider.split_think
        self._split_think = split is not False and bool(asked or (split and asked is not False))
        decoder = self._decoder = StreamDecoder(provider.api, reasoning=self._split_think or asked)
        limits = self.state.config.deadlines
        assert self.state.clients is not None
        pool = self.state.clients.pool(provider)
        headers = _upstream.headers(provider, self.record.request_id, request)
        response: Http1Response | None = None
        if self._abort:
            raise _Abort()
        watch = self._watch = Watchdog(
            AttemptDeadlines(
                first_byte=limits.first_byte_for(len(body) // 4),
                idle=limits.idle,
                total=max(self._deadline - self._loop.time(), 0.0),
            )
        )
        try:
            response = await pool.post(_upstream.url(provider), headers, body)
            if response.status_code >= 400:
                return await _upstream.status_failure(response, provider)
            content_type = response.headers.get("content-type", "")
            if "text/event-stream" not in content_type:
                self._cases.add("E20_json_for_stream")
                data = await response.aread(MAX_UPSTREAM_BODY)
                watch.body_started()
                if len(data) > MAX_UPSTREAM_BODY:
                    message = (
                        f"upstream {provider.name}: its JSON body ran past "
                        f"{MAX_UPSTREAM_BODY} bytes"
                    )
                    events = decoder.too_large(message)
                else:
                    events = decoder.body(data)
                self._deliver(events, turn)
            else:
                chunks = response.aiter_raw()
                graced = False
                received = 0
                async for raw in chunks:
                    if watch.last is None:
                        watch.body_started()
                    else:
                        watch.last = self._loop.time()
                    received += len(raw)
                    if received > MAX_UPSTREAM_STREAM:
                        message = (
                            f"upstream {provider.name}: its stream ran past "
                            f"{MAX_UPSTREAM_STREAM} bytes"
                        )
                        self._deliver(decoder.too_large(message), turn)
                        break
                    if not turn.output_started and len(raw) > _FIRST_SLICE:
                        await self._first_output(raw, decoder, turn)
                    else:
                        events = decoder.feed(raw)
                        if events and self._deliver(events, turn):
                            await asyncio.sleep(0)  # let the writer send (see _writer)
                            if self._writer.pressing:  # a slow client: stop reading
                                await self._writer.backpressure()
                    if not graced and decoder.finish_pending:
                        graced = True
                        watch.finish_seen(limits.finish_grace)
                    if turn.failure is not None and not decoder.finished:
                        break  # the turn failed on its own (E33): stop the upstream now
                    if decoder.finished:
                        if turn.failure is None:  # a failed stream's connection is closed
                            _drain_later(response, chunks)
                            response = None
                        break
                else:
                    self._deliver(decoder.close(), turn)
        except asyncio.CancelledError:
            fired = watch.claim()
            if fired is None:
                raise  # not ours: the server is shutting down
            if fired == "client_cancel" or self._abort:
                raise _Abort() from None
            reason = _DEADLINES[fired]
            if reason == "finish_grace":  # a finished answer whose tail never came: complete
                self._deliver(decoder.close(), turn)
            else:
                retryable = reason != "total_timeout"
                message = _ABORT_MESSAGES[reason]
                self._deliver(decoder.fail(reason, message, retryable=retryable), turn)
        except Http1Error as exc:
            kind = "reset" if exc.connected else "connect"
            message = self.state.redact(f"upstream {provider.name}: {exc}")[:300]
            self._deliver(decoder.fail(kind, message, retryable=True), turn)
        finally:
            watch.stop()
            self._watch = None
            if response is not None:
                await response.aclose()
            self._cases.update(decoder.cases)
            self.record.upstream_id = (decoder.server_id or "")[:200]
        return turn.end()

    async def _first_output(self, raw: bytes, decoder: StreamDecoder, turn: TurnState) -> None:
        """A big read before any output (an upstream that sends a burst): decode it in slices
        so the first token leaves before the rest of the burst is decoded."""
        start = 0
        while start < len(raw) and not decoder.finished:
            end = start + _FIRST_SLICE if not turn.output_started else len(raw)
            events = decoder.feed(raw[start:end])
            start = end
            if events and self._deliver(events, turn):
                await asyncio.sleep(0)

    def _deliver(self, events: list[StreamEvent], turn: TurnState) -> bool:
        """Fold events into the turn and queue the bytes for the client (never waits). True
        when the writer should get the loop now."""
        if self._tool_names:
            events = restore(events, self._tool_names)
        for event in events:
            if isinstance(event, ReasoningSignature):  # the client replays it to us: see wrap
                event = ReasoningSignature(wrap(self.record.provider, event.signature))
            turn.feed(event)
        emitter = self.emitter
        if not turn.output_started:
            return False
        if self.record.ttfb_ms is None:
            self.record.ttfb_ms = (self._loop.time() - self._t0) * 1000
            self.state.metrics.observe_ttfb(self.record.ttfb_ms / 1000)
        if not self.fr.stream:
            emitter.take()  # only the blocks matter for a JSON answer
            return False
        data = emitter.take()
        return bool(data) and self._writer.push(data)

    async def _conclude(self, outcome: TurnEnd | TurnFailure, turn: TurnState) -> None:
        emitter = self.emitter
        record = self.record
        self._cases.update(turn.cases)
        usage = outcome.usage if isinstance(outcome, TurnEnd) else turn.usage
        record.input_tokens = usage.input_tokens
        record.cached_tokens = usage.cached_tokens
        record.output_tokens = usage.output_tokens
        record.reasoning_tokens = usage.reasoning_tokens
        if isinstance(outcome, TurnEnd):
            record.status = "truncated" if outcome.reason == "length" else "success"
            if self.fr.stream:
                self._commit()
                emitter.finish(outcome)
                await self._close_stream(emitter.take())
            else:
                emitter.take()
                blocks = _split_blocks(turn.blocks) if self._split_think else turn.blocks
                body = self.front.render(self.fr, self._ident, emitter, blocks, outcome)
                await self._json(200, body)
            return
        # the upstream wrote this message (an in-stream error may quote the key it refused)
        outcome = replace(outcome, message=self.state.redact(outcome.message))
        record.status = {
            "idle_timeout": "upstream_idle",
            "first_byte_timeout": "upstream_idle",
        }.get(outcome.kind, "upstream_error")
        record.error = outcome.message[:300]
        if self.fr.stream and emitter.started:
            emitter.fail(outcome)
            await self._close_stream(emitter.take())
            record.http_status = 200
        else:
            status = self.front.failure_status(outcome)
            body = self.front.error_body(status, outcome.message)
            await self._json(status, body, outcome.retry_after if outcome.retryable else None)

    async def _refuse(self, status: int, message: str) -> None:
        """A request the chosen upstream cannot take (found while encoding it for that
        provider); called from an except clause, so it swallows the client going away."""
        message = self.state.redact(message)
        try:
            if self._writer.started:
                self.emitter.fail(TurnFailure("bad_request", message, status))
                await self._close_stream(self.emitter.take())
            else:
                await self._json(status, self.front.error_body(status, message))
        except (OSError, _Abort):
            self._cases.add("E40_client_cancel")

    def _finish_record(self, turn: TurnState | None) -> None:
        record = self.record
        record.duration_ms = (self._loop.time() - self._t0) * 1000
        if turn is not None:
            self._cases.update(turn.cases)
        record.cases = ",".join(sorted(self._cases))
        metrics = self.state.metrics
        for case in self._cases:
            metrics.cases[(case,)] += 1
        metrics.requests[(self.front.name, record.provider, record.status)] += 1
        for kind, value in (
            ("input", record.input_tokens),
            ("cached", record.cached_tokens),
            ("output", record.output_tokens),
            ("reasoning", record.reasoning_tokens),
        ):
            if value:
                metrics.tokens[(record.provider, record.model, kind)] += value
        if record.provider:
            price = self.state.config.provider(record.provider).price
            record.cost_usd = price.cost(
                record.input_tokens, record.cached_tokens, record.output_tokens
            )
        self.state.record(record)


def started_at() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")
