"""What a session says once about how the endpoint bounds its calls, after probing it: a
thinking budget the server will not take, and a ``max_tokens`` above the served context
(each call then gets what its prompt leaves, ``context - prompt``)."""

from __future__ import annotations

from solver.config import CHECKER, ROLE_NAMES, Settings
from solver.wire import Api, ServerInfo, thinking_budget_blocker


def endpoint_notes(settings: Settings, info: ServerInfo, api: Api) -> list[str]:
    """Notes for the roles served by the run's own endpoint (``api`` its protocol)."""
    # the checker has calls only when it has an endpoint of its own
    own = [n for n in ROLE_NAMES if n != CHECKER and not settings.role(n).endpoint]
    notes: list[str] = []
    budgets = {n: settings.role(n).thinking_budget for n in own}
    asked = {n: b for n, b in budgets.items() if b is not None}
    if asked:
        why = thinking_budget_blocker(api, info)
        if why is not None:
            listed = ", ".join(f"{n} {b}" for n, b in asked.items())
            notes.append(
                f"thinking budget ({listed}) not sent: {why}; calls are bounded by max_tokens only"
            )
    context = info.context_length
    if context is not None:
        over = {n: settings.role(n).max_tokens for n in own}
        over = {n: m for n, m in over.items() if m >= context}
        if over:
            listed = ", ".join(f"{n} {m}" for n, m in over.items())
            notes.append(
                f"max_tokens ({listed}) is not below the served context of {context} tokens: "
                "each call is capped to what its prompt leaves (the cap is in each "
                "llm.started record, max_tokens_cap)"
            )
    return notes
