"""Which settings a call uses, and the tools its role is offered (split from sources, so
that the manifest, which sources reads, can name the tools too)."""

from __future__ import annotations

import asyncio

from solver import roles
from solver.config import CHECKER, Settings
from solver.loop.tools import ToolBox, sandbox_limits


def settings_role(policy_key: str) -> str:
    """The ``roles.<name>`` settings a call uses: every grading key (grader:evaluation,
    grader:rejudge, the rubric writer) samples, and is served, as the grader."""
    if policy_key == roles.verifier.CHECK:
        return CHECKER  # a later check runs on the checker's endpoint, with its settings
    base = policy_key.split(":")[0]
    return "grader" if base == "rubric_writer" else base


def toolbox_for(settings: Settings) -> ToolBox:
    """The tools each policy key's calls are offered (``roles.<role>.tools``), the limit of
    tool calls in one call, and the sandbox ([sandbox]) they run in."""
    role_tools: dict[str, tuple[str, ...]] = {}
    max_calls: dict[str, int] = {}
    for key in roles.POLICY_KEYS:
        chosen = settings.role(settings_role(key))
        if chosen.tools:
            role_tools[key] = tuple(chosen.tools)
            max_calls[key] = chosen.max_tool_calls
    sandbox = settings.sandbox
    return ToolBox(
        role_tools=role_tools,
        max_calls=max_calls,
        limits=sandbox_limits(sandbox),
        bwrap=sandbox.bwrap,
        python=sandbox.python,
        uid=sandbox.uid,
    )


async def sandbox_ready(settings: Settings) -> None:
    """With tools on for any role, the sandbox must start before anything is sent: raises
    SandboxUnavailable (exit 7), naming the install step. Code is never run outside it."""
    toolbox = toolbox_for(settings)
    if toolbox.used:
        await asyncio.to_thread(toolbox.check)
