"""Sampling fields as each protocol takes them, applied to the request before it is sent (so
the recorded request is the one sent, and the audit re-produces its body)."""

from __future__ import annotations

from dataclasses import replace

from solver.wire.events import Api, Request

__all__ = ["one_sampling_knob"]


def one_sampling_knob(api: Api, request: Request) -> Request:
    """Anthropic's Messages API takes ``temperature`` or ``top_p``, not both: its current
    models answer 400 ("`temperature` and `top_p` cannot both be specified for this model").
    With both set, only ``temperature`` goes."""
    if api != "anthropic" or request.temperature is None or request.top_p is None:
        return request
    return replace(request, top_p=None)
