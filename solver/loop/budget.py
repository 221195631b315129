"""The token budget's reservations: what each solve call in flight may still spend.

A call in flight holds a promise of its prompt estimate plus its output cap (the
``max_tokens`` it is sent with, which the server never exceeds), and a new call starts only if
its own promise fits beside theirs in what is left; on completion its promise is dropped and
what it really spent is counted (the state's ``tokens_total``). So the spent tokens plus every
promise never exceed the budget: the budget holds whatever the calls in flight do.

The cap is a call's *expected* length, not its role's full ``max_tokens``: with a 4M budget and
``max_tokens`` 256000 only 15 full promises fit, which is what kept the policy lab at a median
of 4-5 calls in flight at concurrency 20 late in a run. Once the run has completed
``PRIOR_CALLS`` calls of a role, a call of it is capped at ``MARGIN`` times the longest output
those calls wrote (about the 99th percentile with a few dozen calls of log-normal lengths,
the 94th with four); before that, at the role's ``max_tokens`` and its lineage's share of
what is left (the conservative prior, the rule before: no call is cut that could not have
been cut before). A call that reaches its cap ends
``length``, and its length, the new longest, raises the next cap by ``MARGIN``.
docs/bench-policy.md, "Calls in flight", measures it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

PRIOR_CALLS = 4  # completed calls of a role before its own lengths set the cap
MARGIN = 1.5  # the cap over the longest output of the role so far


def expected_cap(lengths: Iterable[int], max_tokens: int, share: int) -> int:
    """The output cap of a role's next call from the outputs its completed calls wrote;
    before ``PRIOR_CALLS`` of them, the prior: its ``max_tokens``, and no more than ``share``
    (its lineage's share of what is left), so that one call cannot take the budget the other
    candidates need beside it."""
    seen = list(lengths)
    if len(seen) < PRIOR_CALLS:
        return min(max_tokens, share)
    return max(1, min(max_tokens, math.ceil(MARGIN * max(seen))))


@dataclass
class Reservations:
    """The promises of the solve calls in flight under a budget of ``total`` tokens."""

    total: int
    promised: dict[str, int] = field(default_factory=dict)

    def held(self) -> int:
        return sum(self.promised.values())

    def cap(self, spent: int, estimate: int, wanted: int) -> int:
        """The most output tokens a new call with a prompt of about ``estimate`` tokens may
        be given, ``wanted`` at most, beside the promises held, when ``spent`` tokens are
        spent; below 1 when it does not fit. With nothing in flight a call may have all
        that is left: no promise stands in its way."""
        left = self.total - spent
        return min(wanted, left - self.held() - estimate)

    def promise(self, call_id: str, estimate: int, max_tokens: int) -> None:
        self.promised[call_id] = estimate + max_tokens

    def settle(self, call_id: str) -> None:
        """The call ended (completed, failed or cancelled): what it spent is counted by the
        state from its usage, and its promise is released."""
        self.promised.pop(call_id, None)

    def clear(self) -> None:
        self.promised.clear()
