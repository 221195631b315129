"""One way for every verb to report errors: one clear line on stderr, the documented exit code,
no traceback (solver.errors lists the codes)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import click

from solver.errors import EXIT_ERROR, EXIT_INTERRUPTED, exit_code_for

P = ParamSpec("P")
R = TypeVar("R")


def reports_errors(command: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("interrupted; the run can be resumed with `solver resume RUN`", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except Exception as exc:  # every error ends as one line and an exit code
            code = exit_code_for(exc)
            message = str(exc) or type(exc).__name__
            if code == EXIT_ERROR:
                message = f"{type(exc).__name__}: {message}"
            click.echo(f"error: {message}", err=True)
            sys.exit(code)

    return wrapper
