"""The options `solver solve` and `solver eval` share, defined once (each with its settings key).

`solve` solves one problem, `eval run` every problem of a set and `eval calibrate` grades given
proofs; the endpoint they talk to and the search they run are set by the same flags, so a flag
means the same in each, and its default is named where it is declared (solver.config).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from solver.config import default_of

F = TypeVar("F", bound=Callable[..., Any])

# What the calls budget covers, said where it is set: the search's calls only.
MAX_CALLS_HELP = (
    "Budget: model calls of the search (generate, verify, review, revise); the grading and "
    "selection after it are not counted."
)


def _applied(options: list[Callable[[F], F]]) -> Callable[[F], F]:
    """The options as one decorator, shown in ``--help`` in the order listed."""

    def decorate(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def connection_options(*, per_run: bool) -> Callable[[F], F]:
    """Where the model is and how hard to call it: ``endpoint``, ``model``, ``api``,
    ``concurrency``, ``config_file`` and ``as_json`` (``per_run``: each of a set's runs)."""
    scope = "per run" if per_run else "at once"
    return _applied(
        [
            click.option("--endpoint", help="Base URL of the model endpoint (…/v1)."),
            click.option(
                "--model", help="Model name to request (default: what the endpoint serves)."
            ),
            click.option(
                "--api", type=click.Choice(["chat", "responses", "anthropic"]), help="Protocol."
            ),
            click.option(
                "--concurrency",
                type=int,
                help=f"Model calls in flight {scope} (default {default_of('concurrency')}).",
            ),
            click.option(
                "--config", "config_file", type=click.Path(path_type=Path), help="solver.toml."
            ),
            click.option("--json", "as_json", is_flag=True, help="One JSON object per line."),
        ]
    )


def search_options(*, per_run: bool) -> Callable[[F], F]:
    """The search and its budget: ``candidates``, ``verifications``, ``accepted_needed``,
    ``max_calls``, ``max_total_tokens`` and ``max_wall`` (``per_run``: each of a set's runs)."""
    each = "per run " if per_run else ""
    budget = "Budget per run" if per_run else "Budget"
    return _applied(
        [
            click.option(
                "--candidates",
                type=int,
                help=f"Lineages solving in parallel {each}(default {default_of('candidates')}).",
            ),
            click.option(
                "--verifications",
                type=int,
                help="K: passing verifications to accept "
                f"({default_of('acceptance.verifications')}).",
            ),
            click.option(
                "--accept",
                "accepted_needed",
                type=int,
                help=f"A: accepted lineages to stop ({default_of('acceptance.accepted_needed')}).",
            ),
            click.option(
                "--max-calls", type=int, help=("Per run. " if per_run else "") + MAX_CALLS_HELP
            ),
            click.option(
                "--max-tokens",
                "max_total_tokens",
                type=int,
                help=f"{budget}: tokens in total.",
            ),
            click.option(
                "--max-wall",
                type=float,
                help=f"{budget}: wall-clock seconds.",
            ),
        ]
    )


def connection_flags(
    *, endpoint: str | None, model: str | None, api: str | None, concurrency: int | None
) -> dict[str, Any]:
    """The settings keys :func:`connection_options` set (None: not given)."""
    return {"endpoint": endpoint, "model": model, "api": api, "concurrency": concurrency}


def search_flags(
    *,
    candidates: int | None,
    verifications: int | None,
    accepted_needed: int | None,
    max_calls: int | None,
    max_total_tokens: int | None,
    max_wall: float | None,
) -> dict[str, Any]:
    """The settings keys :func:`search_options` set (None: not given)."""
    return {
        "candidates": candidates,
        "acceptance.verifications": verifications,
        "acceptance.accepted_needed": accepted_needed,
        "budget.calls": max_calls,
        "budget.total_tokens": max_total_tokens,
        "budget.wall_clock_s": max_wall,
    }
