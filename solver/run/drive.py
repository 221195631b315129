"""Drive one session of a run: its model clients and their routes, its start and exactly one end
recorded, the engine run to the run's finish; the settings each role's calls are made with.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from solver import roles
from solver._util.masking import mask_argv, mask_url
from solver.config import Settings
from solver.errors import (
    EndpointUnavailable,
    ModelChanged,
    no_room,
)
from solver.identity import code_identity, host_name
from solver.llm import Connection, Deadlines, Endpoint, ModelClient, RetryPolicy
from solver.loop.capacity import SharedCapacity
from solver.loop.contexts import ContextBuilder
from solver.loop.engine import (
    Engine,
    Recorder,
    Route,
    RunProgress,
    monotonic_elapsed,
    wait_for_endpoint,
)
from solver.loop.finish import write_finish
from solver.loop.profiles import CallProfile, CallTable
from solver.loop.state import RunState
from solver.loop.tools import ToolBox
from solver.problems import Problem
from solver.records import (
    EndpointProbed,
    NetConnect,
    RunResult,
    SessionEnded,
    SessionEndReason,
    SessionStarted,
)
from solver.run.endpoint_notes import endpoint_notes
from solver.run.policy_settings import policy_config
from solver.run.sources import (
    role_endpoints,
    settings_role,
    toolbox_for,
)
from solver.store import (
    RunStore,
)


@dataclass(frozen=True)
class RunOutcome:
    run_dir: Path
    outcome: str
    result: RunResult
    already_finished: bool = False  # resume found the run finished: nothing was done


def call_profiles(settings: Settings) -> dict[str, CallProfile]:
    """Each policy key's profile from its ``roles.<name>`` settings (``settings_role``); its
    floor is the role's ``min_tokens``, never above its ``max_tokens``."""

    def profile(name: str) -> CallProfile:
        chosen = settings.role(name)
        return CallProfile(
            max_tokens=chosen.max_tokens,
            min_tokens=min(chosen.min_tokens, chosen.max_tokens),
            temperature=chosen.temperature,
            top_p=chosen.top_p,
            reasoning=chosen.reasoning,
            thinking_budget=chosen.thinking_budget,
        )

    return {key: profile(settings_role(key)) for key in roles.POLICY_KEYS}


ProgressFactory = Callable[[RunState, Callable[[], float]], RunProgress]


def _http_client(
    endpoint: Endpoint,
    deadlines: Deadlines,
    retry: RetryPolicy,
    on_connect: Callable[[Connection], None],
) -> ModelClient:
    return ModelClient(endpoint, deadlines=deadlines, retry=retry, on_connect=on_connect)


# How a session gets its model client and its clock: the real ones by default; a test or the
# policy lab passes an in-process client (solver.testing) and a virtual clock.
ClientFactory = Callable[
    [Endpoint, Deadlines, RetryPolicy, Callable[[Connection], None]], ModelClient
]


ClockFactory = Callable[[float], Callable[[], float]]
# The policy lab holds its virtual clock while a tool runs and charges the run's virtual time.
ToolsFactory = Callable[[ToolBox], ToolBox]


def _same_tools(box: ToolBox) -> ToolBox:
    return box


@dataclass(frozen=True)
class Seams:
    client: ClientFactory = _http_client
    clock: ClockFactory = monotonic_elapsed
    tools: ToolsFactory = _same_tools


@dataclass(frozen=True)
class SessionPlan:
    """What one session of a run is started with: a fresh run's or a resume's."""

    settings: Settings
    endpoint: Endpoint
    problem: Problem
    evaluation: bool
    reason: Literal["fresh", "resume"]
    argv: list[str]
    allow_model_change: bool
    make_progress: ProgressFactory
    # Within an evaluation, the call slots the runs of a set share.
    capacity: SharedCapacity | None = None
    # the masked URL `solver resume --endpoint` moved this session to (recorded with it)
    moved_endpoint: str | None = None
    seams: Seams = Seams()


class _Session:
    """One session's records: its start, exactly one end, the endpoint it probed."""

    def __init__(self, recorder: Recorder, plan: SessionPlan) -> None:
        self.recorder = recorder
        self.plan = plan
        self.number = recorder.state.sessions + 1
        recorder.store.set_session(self.number)
        self.prior_wall_s = recorder.state.ended_wall_s
        self.elapsed = plan.seams.clock(self.prior_wall_s)
        self.ended = False

    def start(self) -> None:
        self.recorder.append(
            SessionStarted(
                templates=self._new_templates(),
                session=self.number,
                reason=self.plan.reason,
                pid=os.getpid(),
                host=host_name(),
                code=code_identity(),
                argv=mask_argv(self.plan.argv),
                allow_model_change=self.plan.allow_model_change,
                endpoint=self.plan.moved_endpoint,
            )
        )

    def _new_templates(self) -> dict[str, str]:
        """Today's templates whose digests neither the manifest nor an earlier session
        names (a run made by an older solver, resumed), their bytes stored as blobs so the
        audit renders this session's prompts from the run alone."""
        known = dict(self.recorder.store.manifest.get("templates") or {})
        named = {(n, d) for n, d in known.items()} | self.recorder.state.session_templates
        new = {n: d for n, d in roles.template_digests().items() if (n, d) not in named}
        for name in sorted(new):
            self.recorder.blob(roles.template_source(name))
        return new

    def end(self, why: SessionEndReason, detail: str = "") -> None:
        if not self.ended:
            self.ended = True
            self.recorder.append(
                SessionEnded(
                    session=self.number,
                    reason=why,
                    detail=detail,
                    wall_s=self.elapsed() - self.prior_wall_s,
                )
            )

    def journal_connection(self, conn: Connection) -> None:
        # a probe's connection, which the calls after it may reuse: no call id
        self.recorder.append(
            NetConnect(call_id="", host=conn.host, port=conn.port, address=conn.address)
        )

    async def probe(self, client: ModelClient) -> str:
        """Wait for the endpoint, record what it serves, refuse a changed model unless
        allowed; the model the calls name."""
        state = self.recorder.state
        endpoint = self.plan.endpoint
        try:
            info = await wait_for_endpoint(client, self.plan.settings.retry.endpoint_wait_s)
        except EndpointUnavailable as exc:
            self.end("endpoint_unavailable", str(exc))
            raise
        served = info.models[0] if info.models else endpoint.model
        changed = None
        if state.first_served_model and served != state.first_served_model:
            if not self.plan.allow_model_change:
                self.end("error", "served model changed")
                raise ModelChanged(
                    f"the endpoint now serves {served!r}, but this run used "
                    f"{state.first_served_model!r}; pass --allow-model-change to go on anyway"
                )
            changed = state.first_served_model
        probed = EndpointProbed(
            url=mask_url(info.url),
            models=list(info.models),
            served_model=served,
            context_length=info.context_length,
            response=self.recorder.blob(info.raw) if info.raw else None,
            model_changed_from=changed,
            notes=endpoint_notes(self.plan.settings, info, endpoint.api),
        )
        self.recorder.append(probed)

        def notice(text: str) -> None:
            # learnt mid-session (the server refused a field the probe could not rule out):
            # the endpoint is recorded again with what it refused, once
            self.recorder.append(probed.model_copy(update={"response": None, "notes": [text]}))

        client.on_notice = notice
        return endpoint.model or served

    def engine(self, client: ModelClient, model: str, routes: dict[str, Route]) -> Engine:
        plan, recorder = self.plan, self.recorder
        settings, problem = plan.settings, plan.problem
        return Engine(
            recorder=recorder,
            contexts=ContextBuilder(recorder.store, recorder.state, problem, seed=settings.seed),
            policy=policy_config(
                settings,
                evaluation=plan.evaluation,
                material=bool(problem.reference_solution or problem.grading_guidelines),
                scheme=bool(problem.reference_solution and not problem.grading_guidelines),
            ),
            calls=CallTable(
                Route(client, model, plan.endpoint.api),
                call_profiles(settings),
                dict(routes),
                plan.seams.tools(toolbox_for(settings)),
            ),
            reserve_full=settings.budget.reserve == "max_tokens",
            # Within an evaluation the run may use any slot the others leave free.
            concurrency=plan.capacity.slots if plan.capacity is not None else settings.concurrency,
            capacity=plan.capacity,
            label=problem.id,
            progress=plan.make_progress(recorder.state, self.elapsed),
            elapsed=self.elapsed,
            endpoint_wait_s=settings.retry.endpoint_wait_s,
        )


@dataclass(frozen=True)
class ModelClientOptions:
    deadlines: Deadlines
    retry: RetryPolicy
    on_connect: Callable[[Connection], None]


def _client_options(
    plan: SessionPlan, on_connect: Callable[[Connection], None]
) -> ModelClientOptions:
    timeouts, retry = plan.settings.timeouts, plan.settings.retry
    deadlines = Deadlines(
        connect=timeouts.connect_s,
        first_byte=timeouts.first_byte_s,
        idle=timeouts.idle_s,
        total=timeouts.total_s,
    )
    policy = RetryPolicy(max_attempts=retry.max_attempts, max_wait=retry.max_wait_s)
    return ModelClientOptions(deadlines, policy, on_connect)


@contextlib.asynccontextmanager
async def _role_routes(
    endpoints: dict[str, Endpoint],
    options: ModelClientOptions,
    wait_s: float,
    make_client: ClientFactory,
) -> AsyncIterator[dict[str, Route]]:
    """One client per distinct role endpoint (graders or a checker of another family), each
    made as the run's own client is and probed before the first call; its connections are
    journalled the same way."""
    async with contextlib.AsyncExitStack() as stack:
        routes: dict[str, Route] = {}
        opened: dict[tuple[str, str, str], Route] = {}
        for key, endpoint in sorted(endpoints.items()):
            ident = (endpoint.base_url, endpoint.api, endpoint.model)
            if ident not in opened:
                made = make_client(endpoint, options.deadlines, options.retry, options.on_connect)
                client = await stack.enter_async_context(made)
                info = await wait_for_endpoint(client, wait_s)
                model = endpoint.model or (info.models[0] if info.models else "")
                opened[ident] = Route(client, model, endpoint.api)
            routes[key] = opened[ident]
        yield routes


async def drive_session(store: RunStore, state: RunState, plan: SessionPlan) -> RunOutcome:
    """One session: start it, probe the endpoint, run the engine to the run's finish, and
    record why the session ended, whatever ends it."""
    recorder = Recorder(store, state)
    session = _Session(recorder, plan)
    session.start()
    try:
        options = _client_options(plan, session.journal_connection)
        async with (
            plan.seams.client(
                plan.endpoint, options.deadlines, options.retry, options.on_connect
            ) as client,
            _role_routes(
                role_endpoints(plan.settings),
                options,
                plan.settings.retry.endpoint_wait_s,
                plan.seams.client,
            ) as routes,
        ):
            model = await session.probe(client)
            if state.phase != "finished":
                finish = await session.engine(client, model, routes).run()
                written = write_finish(recorder, plan.problem, finish, session.elapsed())
                result = RunResult.model_validate(written)
            else:
                result = RunResult(outcome=state.outcome or "failed")
            session.end("finished")
            return RunOutcome(store.run_dir, result.outcome, result)
    except (asyncio.CancelledError, KeyboardInterrupt):
        session.end("interrupted")
        raise
    except EndpointUnavailable as exc:  # mid-run: the endpoint went away and stayed away
        with contextlib.suppress(OSError):
            session.end("endpoint_unavailable", str(exc))
        raise
    except OSError as exc:
        if no_room(exc):
            # The disk is full: the record may not fit either (then status shows a crash,
            # and the next session repairs), but a blob that did not fit leaves room for it.
            store.mark_stopped("storage_full")
            with contextlib.suppress(OSError):
                session.end("storage_full", str(exc))
            session.ended = True
        raise
    except BaseException as exc:
        if not session.ended:
            with contextlib.suppress(OSError):
                session.end("error", f"{type(exc).__name__}: {exc}")
        raise


def finished_outcome(store: RunStore, state: RunState) -> RunOutcome:
    """A finished run resumed: nothing to do, no session and no endpoint (the store still
    writes a signed run's attestation if a crash came just before it)."""
    try:
        result = RunResult.model_validate_json(
            (store.run_dir / "final" / "result.json").read_bytes()
        )
    except (OSError, ValueError):
        result = RunResult(outcome=state.outcome or "failed")
    return RunOutcome(store.run_dir, str(state.outcome), result, already_finished=True)
