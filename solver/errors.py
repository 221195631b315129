"""The project's exception tree and the CLI exit code of each family.

::

    SolverError                     exit 1   anything unexpected but understood
    ├── InputError                  exit 2   bad problem file, set, flag or argument
    │   └── ConfigError             exit 2   bad configuration (names the key and the file)
    ├── EndpointUnavailable         exit 3   the model endpoint stayed unreachable
    ├── AuditFailed                 exit 4   `solver audit` found a failing check
    ├── ModelChanged                exit 5   resume found another served model
    ├── NotFound                    exit 6   a run directory, key or recipe that does not exist
    ├── StorageFull                 exit 74  disk full / file too large while writing a run
    ├── RunCorrupt                  exit 65  a run's journal or blobs are damaged
    ├── RunLocked                   exit 75  another process holds the run's writer lock
    └── Interrupted                 exit 130 Ctrl-C / SIGTERM; the run is resumable

Transport (`solver.llm`) and storage (`solver.store`) keep their own trees, since they import
nothing else of the project; :func:`exit_code_for` maps those too.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_INPUT = 2
EXIT_ENDPOINT = 3
EXIT_AUDIT = 4
EXIT_MODEL_CHANGED = 5
EXIT_NOT_FOUND = 6
EXIT_CORRUPT = 65
EXIT_STORAGE = 74
EXIT_LOCKED = 75
EXIT_INTERRUPTED = 130


class SolverError(Exception):
    """Base of every error the CLI reports as one clear line."""

    exit_code = EXIT_ERROR


class InputError(SolverError):
    exit_code = EXIT_INPUT


class ConfigError(InputError):
    pass


class EndpointUnavailable(SolverError):
    exit_code = EXIT_ENDPOINT


class AuditFailed(SolverError):
    exit_code = EXIT_AUDIT


class ModelChanged(SolverError):
    exit_code = EXIT_MODEL_CHANGED


class NotFound(SolverError):
    exit_code = EXIT_NOT_FOUND


class StorageFull(SolverError):
    exit_code = EXIT_STORAGE


class RunCorrupt(SolverError):
    exit_code = EXIT_CORRUPT


class RunLocked(SolverError):
    exit_code = EXIT_LOCKED


class Interrupted(SolverError):
    exit_code = EXIT_INTERRUPTED


def exit_code_for(exc: BaseException) -> int:
    """The exit code for any exception the CLI may meet, including the transport's and the
    store's own trees (matched by class name so this module imports neither)."""
    if isinstance(exc, SolverError):
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {"LockHeld", "LockHeldError"}:
        return EXIT_LOCKED
    if names & {"NotARun", "RunNotFound"}:
        return EXIT_NOT_FOUND
    if names & {"CorruptionError", "ChainBroken", "CorruptRun"}:
        return EXIT_CORRUPT
    if isinstance(exc, OSError) and exc.errno in (28, 27):  # ENOSPC, EFBIG
        return EXIT_STORAGE
    if names & {"ConnectError", "EndpointUnreachable"}:
        return EXIT_ENDPOINT
    return EXIT_ERROR
