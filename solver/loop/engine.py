"""The engine: runs the calls the policy decides, records each step, feeds results back.

The only place where the loop touches the transport and the run store. Every record goes
through :class:`Recorder`, which appends it durably and then folds it into the state, so the
in-memory state is always exactly fold(journal).

Write-ahead order of one call: ``call.planned`` -> ``context.built`` -> per attempt
``llm.started`` (request bytes durable before the request leaves) -> ``llm.completed`` /
``llm.failed`` (raw response bytes durable before use) -> ``call.completed`` (parsed output,
facts) -> ``artifact.put`` of what the call produced.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

from solver._util.terminal import one_line
from solver.errors import EndpointRefuses, EndpointUnavailable
from solver.llm import (
    Api,
    Completion,
    Message,
    ModelClient,
    ServerInfo,
    decode_body,
    decode_stream,
    fold_events,
)
from solver.loop.budget import Reservations, expected_cap
from solver.loop.capacity import SharedCapacity
from solver.loop.contexts import ContextBuilder, tokens_estimate
from solver.loop.policy import PolicyConfig, RunEnd, decide
from solver.loop.profiles import CallTable
from solver.loop.profiles import Route as Route  # re-exported: callers import it here
from solver.loop.recorder import AttemptFailure as AttemptFailure  # re-exported, as RunProgress
from solver.loop.recorder import CallObserver, journal_usage
from solver.loop.recorder import Recorder as Recorder
from solver.loop.recorder import RunProgress as RunProgress  # re-exported: callers import it here
from solver.loop.state import CallState
from solver.loop.tools import execution_bytes, refused, tool_turn, turn_messages
from solver.records import (
    CallCancelled,
    CallCompleted,
    CallFailed,
    CallPlanned,
    ContextBuilt,
    Decision,
    LlmAbandoned,
    ToolExecuted,
)
from solver.wire import (
    ContextBelowFloor,
    ContextLengthExceeded,
    EndpointUnreachable,
    HTTPStatusError,
    Request,
    Role,
    StreamProtocolError,
    TransportError,
    UnsupportedRequest,
)


class Engine:
    def __init__(
        self,
        *,
        recorder: Recorder,
        contexts: ContextBuilder,
        policy: PolicyConfig,
        calls: CallTable,
        concurrency: int,
        progress: RunProgress,
        elapsed: Callable[[], float],
        endpoint_wait_s: float = 600.0,
        capacity: SharedCapacity | None = None,
        label: str = "",
        reserve_full: bool = False,
    ) -> None:
        # True: a solve call holds its role's full max_tokens of the budget, and no more than
        # its lineage's share of what is left (``budget.reserve = "max_tokens"``).
        self.reserve_full = reserve_full
        # The tools each role's calls are offered (none: no call is offered any)
        self.tools = calls.tools
        self.capacity = capacity  # shared with the other runs of an evaluation
        self.label = label
        self.endpoint_wait_s = endpoint_wait_s
        self.calls = calls
        self._endpoint_back: asyncio.Lock = asyncio.Lock()
        self.recorder = recorder
        self.state = recorder.state
        self.contexts = contexts
        self.policy = policy
        # Each role's calls: their max_tokens, sampling, thinking budget and floor (the fewest
        # output tokens a new solve call may be given under the token budget: below it the
        # call waits for tokens promised to calls in flight, or, with none, the budget ended).
        self.profiles = calls.profiles
        self.concurrency = concurrency
        self.progress = progress
        self.elapsed = elapsed
        self.tasks: dict[str, asyncio.Task[None]] = {}
        # Tokens promised to solve calls in flight (input estimate plus output cap), so that
        # calls started together cannot overrun the token budget between them.
        self._reserved = Reservations(policy.total_tokens or 0)
        self._observers: dict[str, CallObserver] = {}
        # The refusal the last calls failed with, and how many in a row since a call
        # completed: a server refusing every call the same way is misconfigured.
        self._refusal: tuple[str, int] | None = None

    async def run(self) -> RunEnd:
        """Drive the run to its finish. Cancelling this coroutine cancels every call in
        flight; their open attempts are marked abandoned by the next session."""
        try:
            self._record_missing_artifacts()
            self._reissue_unfinished()
            while True:
                step = decide(self.state, self.policy, self.elapsed())
                for decision in step.decisions:
                    self.recorder.append(decision)
                    self.progress.decided(decision)
                if step.cancel:
                    # In the same step as the decision that left the solve phase: the next
                    # decide() looks only at the new phase and would never cancel them.
                    reason = (
                        step.decisions[-1].reason if step.decisions else "the solve phase ended"
                    )
                    await self._cancel(step.cancel, reason)
                if step.decisions or step.cancel:
                    continue
                if step.finish is not None:
                    # A finished run leaves no call without its recorded end.
                    await self._cancel(tuple(self.tasks), "the run finished")
                    return step.finish
                if self._start_calls(step.calls):
                    continue
                if not self.tasks:
                    if self.capacity is not None and step.calls:
                        await self.capacity.changed()  # every slot is another run's: wait
                        continue
                    raise RuntimeError("the policy decided nothing while no call was in flight")
                await self._wait_one()
        finally:
            if self.capacity is not None:
                self.capacity.release(self)
            for task in self.tasks.values():
                task.cancel()
            if self.tasks:
                await asyncio.gather(*self.tasks.values(), return_exceptions=True)
            self.tasks.clear()
            self._reserved.clear()
            self._observers.clear()

    def _forget(self, call_id: str) -> None:
        self._reserved.settle(call_id)
        self._observers.pop(call_id, None)

    def _start_calls(self, planned_calls: tuple[CallPlanned, ...]) -> bool:
        """Start what the policy planned, as far as concurrency and the token budget allow.
        True when the budget cannot fit the next call even with nothing in flight: that is
        recorded as the budget's end, and the policy then leaves the solve phase."""
        free = self.concurrency - len(self.tasks)
        if self.capacity is not None:
            shared = self.capacity.free(self)
            if self.capacity.by_need:
                # what this run planned beyond the free slots waits for one; runs with fewer
                # accepted proofs are served first
                short = max(len(planned_calls) - max(min(free, shared), 0), 0)
                self.capacity.wait(self, short if shared < free else 0, len(self.state.accepted()))
                shared = self.capacity.free(self)
            free = min(free, shared)
        solving = {ln.lineage for ln in self.state.lineages.values() if ln.active}
        solving |= {c.lineage for c in planned_calls if c.phase == "solve" and c.lineage}
        for planned in planned_calls[: max(free, 0)]:
            if planned.call_id in self.state.calls:
                self._start(planned.call_id)
                continue
            estimate = 0
            if self.policy.total_tokens is not None and planned.phase == "solve":
                estimate = self.contexts.input_estimate(_provisional(planned))
            cap = self._token_cap(planned.phase, planned.role, estimate, len(solving))
            floor = self.profiles[planned.role].min_tokens
            if cap is not None and cap < floor:
                if self._reserved.promised:
                    break  # the budget left is promised to calls in flight; wait
                left = (self.policy.total_tokens or 0) - self.state.tokens_total
                decision = Decision(
                    kind="budget_exhausted",
                    reason=f"token budget of {self.policy.total_tokens} used: {left} left, "
                    f"too few for the next call's prompt (about {estimate})"
                    + (f" and its floor of {floor} output tokens" if floor > 1 else ""),
                )
                self.recorder.append(decision)
                self.progress.decided(decision)
                return True
            self.recorder.append(planned)
            self._start(planned.call_id, cap=cap, estimate=estimate)
        self._hold()
        return False

    def _hold(self) -> None:
        if self.capacity is not None:
            self.capacity.set_used(self, len(self.tasks), self.label)

    def _token_cap(self, phase: str, role: str, estimate: int, lineages: int) -> int | None:
        """The most output tokens a new solve call may be given under the token budget: its
        role's expected length (``solver.loop.budget``), within what is left less what the
        calls in flight may still spend and the new call's own input. Grading after the solve
        phase is not capped: the budget bounds the search, not the judging of what it found."""
        if self.policy.total_tokens is None or phase != "solve":
            return None
        left = self.policy.total_tokens - self.state.tokens_total
        # no more than its lineage's share of what is left, so one call cannot take the
        # budget the other candidates need beside it: the whole rule with reserve_full, the
        # prior of a role the run has no lengths of yet otherwise
        share = left // max(lineages, 1) - estimate
        wanted = share
        if not self.reserve_full:
            wanted = expected_cap(
                (
                    c.output_tokens
                    for c in self.state.calls.values()
                    if c.role == role and c.status == "completed"
                ),
                self.profiles[role].max_tokens,
                share,
            )
        cap = self._reserved.cap(self.state.tokens_total, estimate, wanted)
        if cap < 1 and not self._reserved.promised:
            cap = left - estimate  # nothing else is running: all that is left
        return cap

    async def _wait_one(self) -> None:
        timeout = None
        if self.policy.wall_clock_s is not None:
            timeout = max(self.policy.wall_clock_s - self.elapsed(), 0.0) + 0.05
        waiting: list[asyncio.Future[Any]] = list(self.tasks.values())
        freed = None
        if self.capacity is not None:
            # Slots another run gives back may let this one start what it has planned.
            freed = asyncio.ensure_future(self.capacity.changed())
            waiting.append(freed)
        try:
            done, _ = await asyncio.wait(
                waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            if freed is not None:
                freed.cancel()
        for task in done:
            if task is freed:
                continue
            call_id = next(k for k, v in self.tasks.items() if v is task)
            del self.tasks[call_id]
            self._forget(call_id)
            task.result()  # a bug in the engine surfaces here, never silently
        self._hold()

    def _reissue_unfinished(self) -> None:
        """Calls a former session left in flight: one whose response was recorded is finished
        from those bytes; one whose attempt was open is marked abandoned and issued again."""
        for call in list(self.state.calls.values()):
            if call.status != "planned":
                continue
            if call.response_blob is not None and call.open_attempt is None:
                turns = self._recorded_turns(call)
                if not turns or turns[-1][2]:  # its answer: finish it from those bytes
                    self._complete(call, self._recorded_completion(call))
                    continue
                # a turn that asked for tools: the exchange goes on from the journal
                self._start(call.call_id)
                continue
            if call.open_attempt is not None:
                self.recorder.append(
                    LlmAbandoned(
                        call_id=call.call_id,
                        attempt=call.open_attempt,
                        reason="started in an earlier session that ended before it did",
                    )
                )
            self._start(call.call_id)

    def _record_missing_artifacts(self) -> None:
        """A session killed between a call's completion record and the artifacts it produced
        (its proof, its report) left them unrecorded: they are made again from the call's
        recorded response, exactly as live, and nothing is asked of the model."""
        # Artifacts are appended right after their call's completion, in the same step, so
        # only the newest completed call can lack them: one check, not a pass over every call.
        call_id = self.state.last_completed
        if call_id is None:
            return
        call = self.state.calls[call_id]
        if not call.parsed_ok or call.response_blob is None:
            return
        if any(info.producer == call_id for info in self.state.artifacts.values()):
            return
        result = self.contexts.interpret(call, self._recorded_completion(call))
        for artifact in result.artifacts:
            if artifact.artifact not in self.state.artifacts:
                self.recorder.append(artifact)

    def _recorded_completion(self, call: CallState, attempt: int | None = None) -> Completion:
        """The completion of the call's last recorded response, or of ``attempt``'s."""
        blob = call.response_blob if attempt is None else call.responses[attempt]
        assert blob is not None
        raw = self.recorder.store.read_blob(blob)
        if attempt is None:
            api, streamed = call.response_api, call.response_streamed
        else:
            api, streamed = call.attempt_streams.get(attempt, ("chat", True))
        # decoded with the request's reasoning setting, as live: the same completion
        reasoning = self.profiles[call.role].reasoning
        events = (
            decode_stream(cast(Api, api), [raw], reasoning=reasoning)
            if streamed
            else decode_body(cast(Api, api), raw, reasoning=reasoning)
        )
        return fold_events(events, reasoning=reasoning)

    def _recorded_turns(self, call: CallState) -> list[tuple[int, Completion, bool]]:
        """The call's recorded responses in order: (attempt, completion, whether it is the
        call's answer rather than a turn asking for tools)."""
        offered = bool(self.tools.specs(call.role))
        limit = self.tools.limit(call.role)
        used = 0
        turns: list[tuple[int, Completion, bool]] = []
        for attempt in sorted(call.responses):
            completion = self._recorded_completion(call, attempt)
            answer = not (tool_turn(completion, offered) and used < limit)
            turns.append((attempt, completion, answer))
            used += 0 if answer else len(completion.tool_calls)
        return turns

    async def _tool_results(
        self, call: CallState, attempt: int, completion: Completion, used: int
    ) -> list[tuple[str, str, bool]]:
        """Run (or refuse) the tool calls of one response, recording each; those a former
        session recorded are taken from the journal. (tool_call_id, content, is_error)."""
        recorded = {r.index: r for r in call.tool_runs.get(attempt, [])}
        allowed = tuple(spec.name for spec in self.tools.specs(call.role))
        limit = self.tools.limit(call.role)
        results: list[tuple[str, str, bool]] = []
        for index, asked in enumerate(completion.tool_calls):
            done = recorded.get(index)
            if done is None:
                if used + index >= limit:
                    outcome = refused(f"the limit of {limit} tool calls in one call is reached")
                else:
                    outcome = await self.tools.run(asked.name, asked.arguments, allowed)
                execution = outcome.execution
                done = ToolExecuted(
                    call_id=call.call_id,
                    attempt=attempt,
                    index=index,
                    tool_call_id=asked.id,
                    tool=asked.name,
                    status=outcome.status,
                    code=self.recorder.blob(outcome.code.encode()) if outcome.code else None,
                    result=(self.recorder.blob(execution_bytes(execution)) if execution else None),
                    content=self.recorder.blob(outcome.content.encode()),
                    is_error=outcome.is_error,
                    exit=execution.exit if execution else None,
                    timed_out=execution.timed_out if execution else False,
                    killed_reason=execution.killed_reason if execution else None,
                    limits=execution.limits.as_dict() if execution else None,
                    sandbox=execution.sandbox if execution else None,
                )
                self.recorder.append(done)
            content = self.recorder.store.read_blob(done.content.blob).decode("utf-8")
            results.append((asked.id, content, done.is_error))
        return results

    def _start(self, call_id: str, *, cap: int | None = None, estimate: int = 0) -> None:
        if call_id in self.tasks:
            return
        call = self.state.calls[call_id]
        max_tokens = self.profiles[call.role].max_tokens
        if cap is None and self.policy.total_tokens is not None and call.phase == "solve":
            # A call issued again on resume is already planned: it must run, so it is capped
            # by the budget left alone (at least one token), not deferred.
            estimate = self.contexts.input_estimate(call)
            cap = self.policy.total_tokens - self.state.tokens_total - estimate
        if cap is not None:
            max_tokens = min(max_tokens, max(cap, 1))
            self._reserved.promise(call_id, estimate, max_tokens)
        self.progress.call_started(call)
        self.tasks[call_id] = asyncio.create_task(self._run_call(call, max_tokens), name=call_id)

    async def _cancel(self, call_ids: tuple[str, ...], reason: str) -> None:
        for call_id in call_ids:
            task = self.tasks.pop(call_id, None)
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            call = self.state.calls[call_id]
            if call.status != "planned":
                self._forget(call_id)
                continue  # it ended on its own before the cancel reached it
            observer = self._observers.get(call_id)
            if call.open_attempt is not None:
                self.recorder.append(
                    LlmAbandoned(
                        call_id=call_id,
                        attempt=call.open_attempt,
                        reason=reason,
                        usage=observer.cut_usage() if observer else None,
                    )
                )
            self._forget(call_id)
            self.recorder.append(CallCancelled(call_id=call_id, reason=reason))
            self.progress.call_finished(call)  # the live view stops showing it in flight

    async def _run_call(self, call: CallState, max_tokens: int) -> None:
        built = self.contexts.build(call)
        if not call.has_context:
            for artifact in built.new_artifacts:
                if artifact.artifact not in self.state.artifacts:
                    self.recorder.append(artifact)
            self.recorder.append(
                ContextBuilt(
                    call_id=call.call_id,
                    role=call.role,
                    variant=call.variant,
                    templates=built.templates,
                    inputs=self.recorder.blob(built.inputs_json),
                    links=built.links,
                    messages=self.recorder.blob(built.messages_json),
                )
            )
        route = self.calls.route(call.role)
        specs = self.tools.specs(call.role)
        limit = self.tools.limit(call.role)
        # the thinking budget as configured: the client fits it to the call's final cap
        request = self.profiles[call.role].request(
            route.model,
            tuple(Message.text(cast(Role, role), text) for role, text in built.messages),
            max_tokens,
            tools=specs,
        )
        # A call with tools is an exchange of turns; a resumed one goes on from the journal.
        exchange: list[Message] = []
        used = 0
        for attempt, done, answer in self._recorded_turns(call):
            if answer:
                break
            results = await self._tool_results(call, attempt, done, used)
            exchange.extend(turn_messages(done, results))
            used += len(done.tool_calls)
        while True:
            turn = replace(
                request,
                messages=request.messages + tuple(exchange),
                # every tool call used: the model must answer now
                tool_choice="none" if specs and used >= limit else None,
            )
            completion = await self._ask(call, route, turn, len(built.messages_json))
            if completion is None:
                return  # failed, recorded
            if not (tool_turn(completion, bool(specs)) and used < limit):
                break
            attempt = max(self.state.calls[call.call_id].responses)
            results = await self._tool_results(call, attempt, completion, used)
            exchange.extend(turn_messages(completion, results))
            used += len(completion.tool_calls)
        self._complete(call, completion)
        self._refusal = None
        self.progress.call_finished(call)

    async def _ask(
        self, call: CallState, route: Route, request: Request, prompt_chars: int
    ) -> Completion | None:
        """One turn of the call, retried by the client, waiting out an endpoint that went
        away; None when it failed for good (recorded)."""
        while True:
            observer = CallObserver(self.recorder, call.call_id, route.api, self.progress)
            observer.input_estimate = tokens_estimate(prompt_chars)
            self._observers[call.call_id] = observer
            try:
                return await route.client.complete(request, observer)
            except TransportError as exc:
                observer.abort_open()
                if not _endpoint_down(exc):
                    self._fail(call, exc)
                    return None
            except BaseException:
                observer.abort_open()
                raise
            # The endpoint went away: wait for it (raising EndpointUnavailable after the
            # configured time, which ends the session resumable), then ask again.
            async with self._endpoint_back:
                await wait_for_endpoint(route.client, self.endpoint_wait_s)

    def _fail(self, call: CallState, exc: TransportError) -> None:
        self.recorder.append(
            CallFailed(
                call_id=call.call_id,
                role=call.role,
                error_kind=type(exc).__name__,
                message=str(exc),
            )
        )
        self.progress.call_finished(call)
        self._count_refusal(exc)

    def _count_refusal(self, exc: TransportError) -> None:
        """End the session when :data:`REFUSALS_IN_A_ROW` calls in a row were refused the
        same way (the same HTTP 4xx, a request the protocol cannot carry, an answer in
        another protocol) with none completed between: every call would be, and a search of
        failed calls would end as an honest-looking "unsolved". A prompt the context cannot
        hold counts only while no call of the run has completed (the statement itself does
        not fit); later, one long proof's verifications failing so is the policy's to judge."""
        sign = refusal_sign(exc)
        if sign == "context" and any(c.status == "completed" for c in self.state.calls.values()):
            sign = None
        if sign is None:
            self._refusal = None
            return
        seen = self._refusal[1] + 1 if self._refusal and self._refusal[0] == sign else 1
        self._refusal = (sign, seen)
        if seen >= REFUSALS_IN_A_ROW:
            raise EndpointRefuses(
                f"{seen} calls in a row were refused the same way, so every call would be: "
                f"{one_line(str(exc), 300)}; {refusal_fix(exc)} (the run is kept: "
                "`solver resume` continues it once that is fixed)"
            )

    def _complete(self, call: CallState, completion: Completion) -> None:
        result = self.contexts.interpret(call, completion)
        usage = journal_usage(completion.usage)
        reasoning = (
            self.recorder.blob(completion.reasoning.encode()) if completion.reasoning else None
        )
        self.recorder.append(
            CallCompleted(
                call_id=call.call_id,
                role=call.role,
                finish_reason=completion.finish_reason,
                truncated=result.truncated,
                parsed_ok=result.parsed_ok,
                output=self.recorder.blob(result.output_json),
                text=self.recorder.blob(completion.text.encode()),
                reasoning=reasoning,
                usage=usage,
                facts=result.facts,
            )
        )
        for artifact in result.artifacts:
            self.recorder.append(artifact)


def _provisional(planned: CallPlanned) -> CallState:
    """The state a planned call will have, for estimating its prompt before it is recorded."""
    return CallState(
        call_id=planned.call_id,
        role=planned.role,
        variant=planned.variant,
        phase=planned.phase,
        lineage=planned.lineage,
        version=planned.version,
        target=planned.target,
        evaluation=planned.evaluation,
    )


# Stream errors that, repeated call after call, say the answers are in another protocol.
UNREADABLE_STREAMS = ("malformed", "eof_without_finish")
# Calls refused the same way in a row before the session ends (see Engine._count_refusal).
# Three: more than one variant of a role, and more than one role's prompt, have been tried.
REFUSALS_IN_A_ROW = 3


def refusal_sign(exc: TransportError) -> str | None:
    """What a refusal that would repeat on every call is (None: not one): a 4xx answer
    other than the retryable ones, a prompt the context cannot hold, a request the
    protocol cannot carry."""
    if isinstance(exc, ContextBelowFloor | ContextLengthExceeded):
        return "context"
    if isinstance(exc, UnsupportedRequest):
        return "unsupported"
    if isinstance(exc, HTTPStatusError) and 400 <= exc.status < 500 and not exc.retryable:
        return f"http {exc.status}"
    if isinstance(exc, StreamProtocolError) and exc.kind in UNREADABLE_STREAMS:
        # after all its retries: answers in another protocol read as these
        return f"stream {exc.kind}"
    return None


def refusal_fix(exc: TransportError) -> str:
    """The likely fix of a refusal, named for the person who can make it."""
    if isinstance(exc, ContextBelowFloor) and exc.floor > 1 and exc.cap > 0:
        return (
            f"the context leaves {exc.cap} output tokens, below the role's min_tokens of "
            f"{exc.floor}: lower roles.<role>.min_tokens or serve the model with a longer context"
        )
    if isinstance(exc, ContextBelowFloor | ContextLengthExceeded):
        return "the prompts do not fit the model's context: serve it with a longer one"
    if isinstance(exc, HTTPStatusError) and exc.status in (401, 403):
        return "the server refuses the API key: check SOLVER_API_KEY"
    if isinstance(exc, HTTPStatusError) and exc.status in (404, 405):
        return "the server has no such path or model: check --api, --endpoint and --model"
    if isinstance(exc, StreamProtocolError):
        return "the server's answers cannot be read in the protocol asked for: check --api"
    return "check --api, --model and the roles' settings against what the server takes"


def _endpoint_down(exc: TransportError) -> bool:
    if isinstance(exc, EndpointUnreachable):
        return True
    return isinstance(exc, HTTPStatusError) and exc.status in (502, 503, 504)


async def wait_for_endpoint(client: ModelClient, wait_s: float) -> ServerInfo:
    """Probe until the endpoint answers, backing off, for at most ``wait_s`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    delay = 0.5
    while True:
        try:
            return await client.probe()
        except TransportError as exc:
            if loop.time() + delay > deadline:
                raise EndpointUnavailable(
                    f"the model endpoint did not answer for {wait_s:g} s ({exc}); "
                    "the run is kept and can be continued with `solver resume`"
                ) from None
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)


def monotonic_elapsed(prior_s: float) -> Callable[[], float]:
    """Wall time of the run so far: earlier sessions plus this one."""
    started = time.monotonic()
    return lambda: prior_s + (time.monotonic() - started)
