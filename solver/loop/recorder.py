"""Journalling of model calls: the Recorder every loop record goes through, and the observer
that records each attempt of one call as the transport makes it (split from the engine)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from solver._util.masking import mask_url
from solver.loop.contexts import tokens_estimate
from solver.loop.state import CallState, RunState
from solver.records import (
    BlobLink,
    Decision,
    LlmCompleted,
    LlmFailed,
    LlmStarted,
    LoopRecord,
    NetConnect,
    Usage,
)
from solver.store import BlobWriter, RunStore
from solver.wire import (
    AttemptEnd,
    AttemptStart,
    Connection,
    ReasoningDelta,
    RetryNotice,
    StreamEvent,
    TextDelta,
    request_params,
)
from solver.wire import (
    Usage as TransportUsage,
)


class RunProgress(Protocol):
    def call_started(self, call: CallState) -> None: ...
    def call_finished(self, call: CallState) -> None: ...
    def streamed(self, call_id: str, chars: int) -> None: ...
    def retrying(self, call_id: str, notice: RetryNotice) -> None: ...
    def decided(self, decision: Decision) -> None: ...
    def attempt_failed(self, failure: AttemptFailure) -> None: ...


@dataclass(frozen=True)
class AttemptFailure:
    """An attempt that ended in an error other than a cancellation, as the progress view
    tells it: ``worker`` is the one a gateway routed it to (None without a gateway)."""

    call_id: str
    attempt: int
    error_kind: str
    message: str
    retryable: bool
    worker: str | None


class Recorder:
    """Appends records durably, then folds them into the state."""

    def __init__(self, store: RunStore, state: RunState) -> None:
        self.store = store
        self.state = state

    def append(self, record: LoopRecord) -> None:
        written = self.store.append(record.record_type(), record.data())
        self.state.apply(record, written.t)

    def blob(self, data: bytes) -> BlobLink:
        ref = self.store.put_blob(data)
        return BlobLink(blob=ref.digest, bytes=ref.size)


@dataclass
class _OpenAttempt:
    attempt: int
    sink: BlobWriter


def journal_usage(usage: TransportUsage) -> Usage:
    """The transport's token counts as the journal records them."""
    return Usage(
        input_tokens=usage.input_tokens,
        cached_tokens=usage.cached_tokens,
        output_tokens=usage.output_tokens,
        reasoning_tokens=usage.reasoning_tokens,
    )


@dataclass
class CallObserver:
    """Journals each attempt of one call as the transport makes it."""

    recorder: Recorder
    call_id: str
    api: str
    progress: RunProgress
    open: dict[str, _OpenAttempt] = field(default_factory=dict)
    input_estimate: int = 0  # the prompt's tokens, on the high side
    streamed_chars: int = 0  # of the attempt in progress, for the usage of one cut short

    def cut_usage(self) -> Usage | None:
        """What an attempt cut mid-stream spent, estimated (the server never said): its
        prompt, and the output that streamed before the cut. None if nothing streamed."""
        if self.streamed_chars == 0:
            return None
        return Usage(
            input_tokens=self.input_estimate, output_tokens=tokens_estimate(self.streamed_chars)
        )

    def attempt_started(self, start: AttemptStart) -> BlobWriter:
        call = self.recorder.state.calls[self.call_id]
        attempt = call.attempts + 1
        request = self.recorder.blob(start.body)
        self.recorder.append(
            LlmStarted(
                call_id=self.call_id,
                attempt=attempt,
                request_id=start.request_id,
                url=mask_url(start.url),
                api=self.api,
                params=request_params(start.request),
                request=request,
                max_tokens_cap=start.max_tokens_cap,
            )
        )
        # the client hashes every byte it hands the sink, so the store need not hash them again
        sink = self.recorder.store.blob_writer(hashed=False)
        self.open[start.request_id] = _OpenAttempt(attempt, sink)
        self.streamed_chars = 0
        return sink

    def attempt_ended(self, start: AttemptStart, end: AttemptEnd) -> None:
        opened = self.open.pop(start.request_id)
        ref = opened.sink.commit("sha256:" + end.response_sha256)
        response = BlobLink(blob=ref.digest, bytes=ref.size)
        usage = journal_usage(end.usage)
        telemetry = _telemetry(end)
        cut = self.cut_usage() if end.error_kind == "cancelled" and not usage.total else None
        if cut is not None:  # the budget counts what was generated
            usage = usage.model_copy(
                update={"input_tokens": cut.input_tokens, "output_tokens": cut.output_tokens}
            )
        if end.error_kind is None:
            self.recorder.append(
                LlmCompleted(
                    call_id=self.call_id,
                    attempt=opened.attempt,
                    response=response,
                    status=end.status,
                    finish_reason=end.finish_reason,
                    usage=usage,
                    telemetry=telemetry,
                )
            )
        else:
            self.recorder.append(
                LlmFailed(
                    call_id=self.call_id,
                    attempt=opened.attempt,
                    response=response,
                    error_kind=end.error_kind,
                    message=end.error_message or "",
                    retryable=end.retryable,
                    usage=usage,
                    telemetry=telemetry,
                )
            )
            if end.error_kind != "cancelled":  # a cancellation shows as the call's end
                failure = AttemptFailure(
                    call_id=self.call_id,
                    attempt=opened.attempt,
                    error_kind=end.error_kind,
                    message=end.error_message or "",
                    retryable=end.retryable,
                    worker=end.routed_worker,
                )
                self.progress.attempt_failed(failure)

    def connection_opened(self, conn: Connection) -> None:
        self.recorder.append(
            NetConnect(call_id=self.call_id, host=conn.host, port=conn.port, address=conn.address)
        )

    def on_event(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta | ReasoningDelta):
            self.streamed_chars += len(event.text)
            self.progress.streamed(self.call_id, len(event.text))

    def retry_scheduled(self, notice: RetryNotice) -> None:
        self.progress.retrying(self.call_id, notice)

    def abort_open(self) -> None:
        for opened in self.open.values():
            opened.sink.abort()
        self.open.clear()


def _telemetry(end: AttemptEnd) -> dict[str, Any]:
    return {
        "request_id": end.request_id,
        "server_request_id": end.server_request_id,
        "ttfb_s": end.ttfb_s,
        "ttft_s": end.ttft_s,
        "total_s": end.total_s,
        "output_tokens_per_s": end.output_tokens_per_s,
        "retry_index": end.retry_index,
        "normalised_cases": list(end.normalised_cases),
        # only behind a gateway that names the worker (smg): absent keeps old records' bytes
        **({"routed_worker": end.routed_worker} if end.routed_worker else {}),
    }
