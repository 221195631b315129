"""The project's one exception tree; each class carries the CLI exit code of its family.

::

    SolverError                     exit 1   anything unexpected but understood
    ├── InputError                  exit 2   bad problem file, set, flag or argument
    │   └── ConfigError             exit 2   bad configuration (names the key and the file)
    │       ├── EndpointRefuses     exit 2   mid-run: the server refused call after call alike
    │       └── ProxyConfigError    exit 2   the same, of the protocol proxy
    │           └── UnknownProvider exit 6   no provider of that name (also a NotFound)
    ├── EndpointUnavailable         exit 3   the model endpoint stayed unreachable
    ├── AuditFailed                 exit 4   `solver audit` found a failing check
    ├── ModelChanged                exit 5   resume found another served model
    ├── NotFound                    exit 6   a run directory, key or recipe that does not exist
    ├── SandboxUnavailable          exit 7   bubblewrap is missing or cannot start a sandbox
    ├── RunCorrupt                  exit 65  a run's journal or blobs are damaged
    ├── StorageFull                 exit 74  disk full / file too large while writing
    ├── RunLocked                   exit 75  another process holds the run's writer lock
    ├── Interrupted                 exit 130 Ctrl-C / SIGTERM; the run is resumable
    ├── TransportError  (solver.wire.errors)   the model transport's own tree
    └── StoreError      (solver.store.errors)  the run store's own tree

The transport's and the store's classes also derive from the family above that fits them
(``LockHeld`` is a ``RunLocked``, ``EndpointUnreachable`` an ``EndpointUnavailable``), so
their exit code comes with the class. This module imports nothing else of the project, so
every package may use it; :func:`exit_code_for` maps foreign exceptions by class, in one place.
"""

from __future__ import annotations

import errno
import sys
from typing import Any

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_INPUT = 2
EXIT_ENDPOINT = 3
EXIT_AUDIT = 4
EXIT_MODEL_CHANGED = 5
EXIT_NOT_FOUND = 6
EXIT_SANDBOX = 7
EXIT_CORRUPT = 65
EXIT_STORAGE = 74
EXIT_LOCKED = 75
EXIT_INTERRUPTED = 130

# The errno values of a write that found no room: the disk is full, or the file too large.
NO_ROOM_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG})


class SolverError(Exception):
    """Base of every error the CLI reports as one clear line."""

    exit_code = EXIT_ERROR

    def __reduce__(self) -> tuple[Any, ...]:
        # Many subclasses take other arguments than the message they pass on, so the default
        # (the class called with ``args``) cannot rebuild them: an error raised in a worker
        # process (the policy lab's, a set run's) would arrive as a TypeError instead.
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls: type[SolverError], args: tuple[Any, ...], state: dict[str, Any]) -> SolverError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class InputError(SolverError):
    exit_code = EXIT_INPUT


class ConfigError(InputError):
    pass


class EndpointRefuses(ConfigError):
    """Mid-run, calls in a row were refused the same way (a 4xx, a prompt the context
    cannot hold): the configuration does not fit the server. The run is kept, resumable."""


class ProxyConfigError(ConfigError):
    """A bad proxy config file or option; the message names the key and the file."""


class EndpointUnavailable(SolverError):
    exit_code = EXIT_ENDPOINT


class AuditFailed(SolverError):
    exit_code = EXIT_AUDIT


class ModelChanged(SolverError):
    exit_code = EXIT_MODEL_CHANGED


class NotFound(SolverError):
    exit_code = EXIT_NOT_FOUND


class UnknownProvider(ProxyConfigError, NotFound):
    """The proxy's config has no provider of the name asked for: a missing thing (exit 6),
    though found while reading the config."""

    exit_code = EXIT_NOT_FOUND


class SandboxUnavailable(SolverError):
    """The code sandbox (bubblewrap) is missing or cannot start; code is then never run."""

    exit_code = EXIT_SANDBOX


class RunCorrupt(SolverError):
    exit_code = EXIT_CORRUPT


class StorageFull(SolverError, OSError):
    """A write found no room. Also an OSError carrying the original errno, so code that
    catches OSError around a write still sees it for what it is."""

    exit_code = EXIT_STORAGE

    def __init__(self, path: str, cause: OSError) -> None:
        what = "disk full" if cause.errno == errno.ENOSPC else "file too large"
        self.message = f"cannot write {path}: {what} ({cause.strerror})"
        super().__init__(self.message)
        self.path = path
        self.errno = cause.errno
        self.strerror = cause.strerror

    def __str__(self) -> str:
        return self.message


class RunLocked(SolverError):
    exit_code = EXIT_LOCKED


class Interrupted(SolverError):
    exit_code = EXIT_INTERRUPTED


def no_room(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that found no room (ENOSPC or EFBIG)."""
    return isinstance(exc, OSError) and exc.errno in NO_ROOM_ERRNOS


def exit_code_for(exc: BaseException) -> int:
    """The exit code for any exception the CLI may meet. The project's own errors carry
    theirs; foreign ones are mapped here by class."""
    if isinstance(exc, SolverError):
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if no_room(exc):
        return EXIT_STORAGE
    # httpx is imported lazily: the store and the CLI's fast verbs never need it.
    httpx = _loaded("httpx")
    if httpx is not None and isinstance(exc, httpx.ConnectError):
        return EXIT_ENDPOINT
    yaml = _loaded("yaml")
    if yaml is not None and isinstance(exc, yaml.YAMLError):
        return EXIT_INPUT
    return EXIT_ERROR


def _loaded(name: str) -> Any:
    """A module that is already imported, or None: an exception of a module nobody loaded
    cannot be the one at hand, so mapping never pays for an import."""
    return sys.modules.get(name)
