"""Run a solve in-process against the fake endpoint, and read the run back."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from solver.config import ResolvedSettings, resolve_settings
from solver.llm import Connection, Deadlines, Endpoint, ModelClient, RetryPolicy
from solver.loop.state import RunState
from solver.problems import load_problem
from solver.run import RunOutcome, Seams, read_state, resume_run, start_run
from solver.testing import FakeEndpoint, RecordedRequest, Responder, ScriptedClient
from solver.testing.fake_endpoint import Reply


class QuietProgress:
    def __init__(self, state: RunState, elapsed: Callable[[], float]) -> None:
        self.events: list[str] = []

    def call_started(self, call: Any) -> None:
        self.events.append(f"start {call.call_id}")

    def call_finished(self, call: Any) -> None:
        self.events.append(f"end {call.call_id}")

    def streamed(self, call_id: str, chars: int) -> None:
        pass

    def retrying(self, call_id: str, notice: Any) -> None:
        self.events.append(f"retry {call_id} {notice.failed_attempt}/{notice.max_attempts}")

    def attempt_failed(self, failure: Any) -> None:
        pass

    def decided(self, decision: Any) -> None:
        self.events.append(f"decide {decision.kind}")


PROBLEM = """---
id: odd-squares
title: Sum of two odd squares
answer: "2"
---
Prove that the sum of the squares of two odd integers is never a perfect square.
"""

EVAL_PROBLEM = """---
id: odd-squares-eval
reference_solution: "Work modulo 4. MARKER-REFERENCE-55aa"
grading_guidelines: "(Partial) reduce modulo 4."
---
Prove that the sum of the squares of two odd integers is never a perfect square.
"""


class ScriptedEndpoint:
    """A FakeEndpoint stand-in for tests whose subject is the loop, not the wire: the same
    responders, answered in-process at the ModelClient seam (no server, no sockets), with
    the journal records a run over HTTP has. ``with ScriptedEndpoint(scripts.solved) as
    fake: solve(fake, tmp_path)``."""

    url = "http://127.0.0.1:9"  # never dialled; the allow-list and the audit see this port

    def __init__(
        self,
        responder: Responder | list[Reply],
        *,
        thinking_budget: bool = False,
        context_length: int | None = 131072,
    ) -> None:
        """``thinking_budget``: the probe answers as SGLang with its thinking-budget processor
        on. ``context_length``: the served context the probe tells."""
        self.responder = responder
        self.thinking_budget = thinking_budget
        self.context_length = context_length
        self.requests: list[RecordedRequest] = []

    def __enter__(self) -> ScriptedEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def seams(self) -> Seams:
        def client(
            endpoint: Endpoint,
            deadlines: Deadlines,
            retry: RetryPolicy,
            on_connect: Callable[[Connection], None],
        ) -> ModelClient:
            scripted = ScriptedClient(
                endpoint,
                self.responder,
                on_connect=on_connect,
                thinking_budget=self.thinking_budget,
                context_length=self.context_length,
            )
            scripted.requests = self.requests  # one list across sessions, as a fake keeps
            return scripted

        return Seams(client=client)


def write_problem(tmp_path: Path, text: str = PROBLEM, name: str = "odd.md") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def flags_for(
    fake: FakeEndpoint | ScriptedEndpoint, tmp_path: Path, **extra: Any
) -> dict[str, Any]:
    base = {
        "endpoint": fake.url + "/v1",
        "api": "chat",
        "runs_dir": tmp_path / "runs",
        "candidates": 2,
        "concurrency": 4,
        "acceptance.verifications": 2,
        "acceptance.accepted_needed": 1,
        "retry.endpoint_wait_s": 2.0,
        "retry.max_attempts": 2,
        "retry.max_wait_s": 0.2,
        "timeouts.idle_s": 20.0,
        "timeouts.first_byte_s": 20.0,
    }
    base.update({k.replace("__", "."): v for k, v in extra.items()})
    return base


def start(
    problem_path: Path,
    resolved: ResolvedSettings,
    *,
    make_progress: Callable[..., Any] = QuietProgress,
    on_created: Callable[[Path], None] = lambda _: None,
) -> RunOutcome:
    """``start_run`` on a problem file with these settings, outside evaluation mode."""
    return asyncio.run(
        start_run(
            load_problem(problem_path),
            problem_path,
            resolved,
            evaluation=False,
            argv=[],
            make_progress=make_progress,
            on_created=on_created,
        )
    )


def solve(
    fake: FakeEndpoint | ScriptedEndpoint,
    tmp_path: Path,
    problem_text: str = PROBLEM,
    *,
    blind: bool = False,
    **extra: Any,
) -> RunOutcome:
    problem_path = write_problem(tmp_path, problem_text)
    problem = load_problem(problem_path)
    resolved = resolve_settings(flags=flags_for(fake, tmp_path, **extra), env={}, cwd=tmp_path)
    evaluation = not blind and bool(problem.reference_solution or problem.grading_guidelines)
    created: list[Path] = []
    return asyncio.run(
        start_run(
            problem,
            problem_path,
            resolved,
            evaluation=evaluation,
            argv=["solve", str(problem_path)],
            make_progress=QuietProgress,
            on_created=created.append,
            seams=fake.seams() if isinstance(fake, ScriptedEndpoint) else Seams(),
        )
    )


def resume(run_dir: Path, tmp_path: Path) -> RunOutcome:
    resolved = resolve_settings(env={}, cwd=tmp_path)
    return asyncio.run(
        resume_run(
            run_dir,
            resolved,
            allow_model_change=False,
            argv=["resume"],
            make_progress=QuietProgress,
        )
    )


def result_of(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "final" / "result.json").read_text())


def state_of(run_dir: Path) -> RunState:
    return read_state(run_dir)[1]


def audit_ok(run_dir: Path) -> None:
    from solver.audit import audit_run

    report = audit_run(run_dir)
    failing = [c for c in report.checks if c.status == "fail"]
    assert report.ok, failing
    names = {c.name for c in report.checks}
    assert {"calls", "prompts", "isolation", "network"} <= names, names


def max_in_flight(run_dir: Path) -> int:
    """The most attempts that were open at once, read from the journal."""
    from solver.store import RunReader

    open_now = peak = 0
    for rec in RunReader(run_dir).records():
        if rec.type == "llm.started":
            open_now += 1
            peak = max(peak, open_now)
        elif rec.type in ("llm.completed", "llm.failed", "llm.abandoned"):
            open_now -= 1
    return peak
