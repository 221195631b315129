"""How each role's calls are made: one typed, frozen profile per policy key, one table.

A profile is the role's settings as the engine uses them (``roles.<role>`` of the run's
settings, read once when the session starts): the most output tokens a call asks for, the
fewest it may be capped to, its sampling and its thinking budget. The engine takes the table;
the request it makes of a profile carries the budget as configured and the role's
``max_tokens``, and the client alone fits the budget to the call's final cap
(:func:`solver.wire.with_thinking_budget`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from solver.loop.tools import ToolBox
from solver.wire import Message, Request, ToolSpec

if TYPE_CHECKING:  # a route holds a client; the table itself needs none to be built or read
    from solver.llm import ModelClient


@dataclass(frozen=True)
class CallProfile:
    max_tokens: int
    # the fewest output tokens a call may be capped to (roles.<role>.min_tokens, never above
    # max_tokens): below it a call waits for budget, or is not sent to a short context
    min_tokens: int = 1
    temperature: float | None = None
    top_p: float | None = None
    reasoning: bool | None = None
    seed: int | None = None
    thinking_budget: int | None = None

    def request(
        self,
        model: str,
        messages: tuple[Message, ...],
        max_tokens: int,
        tools: tuple[ToolSpec, ...] = (),
    ) -> Request:
        """The request of one call of this profile, capped to ``max_tokens`` (the token
        budget's cap, or the profile's own), offering ``tools``."""
        return Request(
            model=model,
            messages=messages,
            max_tokens=max_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            seed=self.seed,
            reasoning=self.reasoning,
            thinking_budget=self.thinking_budget,
            max_tokens_setting=self.max_tokens,
            min_tokens=self.min_tokens,
            tools=tools,
        )


# Policy key (``generator``, ``verifier:check``, ``grader:evaluation``, ...) -> its profile.
CallProfiles = Mapping[str, CallProfile]


@dataclass(frozen=True)
class Route:
    """Where the calls of one role go when it has an endpoint of its own (graders of another
    model family): that endpoint's client, the model to ask it for, its protocol."""

    client: ModelClient
    model: str
    api: str


def _no_tools() -> ToolBox:
    return ToolBox(role_tools={}, max_calls={})


@dataclass(frozen=True)
class CallTable:
    """Everything about how each role's calls are made, the one table the engine takes: the
    run's endpoint, the profiles (policy key -> profile), the roles with an endpoint of their
    own (policy key -> route; the others go to the run's) and the tools each role is offered."""

    endpoint: Route
    profiles: CallProfiles
    routes: Mapping[str, Route] = field(default_factory=dict)
    tools: ToolBox = field(default_factory=_no_tools)

    def route(self, role: str) -> Route:
        """Where a call of policy key ``role`` goes: its own endpoint, else the run's."""
        return self.routes.get(role) or self.endpoint
