"""One way for every verb to report errors: one clear line on stderr, the documented exit code,
no traceback (solver.errors lists the codes)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import click

from solver._util.masking import mask_urls_in, redact
from solver._util.terminal import one_line
from solver.errors import EXIT_ERROR, EXIT_INTERRUPTED, exit_code_for

# An error names a file and what is wrong; a message longer than this carries input, not sense.
MAX_MESSAGE_CHARS = 1000
# Where a key may come from the environment: any fragment of one is masked in what is shown.
KEY_VARIABLES = ("SOLVER_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")

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
            # one line, bounded, its control characters shown rather than sent to the terminal
            message = mask_urls_in(message)
            message = redact(message, [os.environ.get(name) for name in KEY_VARIABLES])
            click.echo(f"error: {one_line(message, MAX_MESSAGE_CHARS)}", err=True)
            sys.exit(code)

    return wrapper
