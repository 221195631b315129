"""Every error of the project's tree survives a process boundary (pickle), as raised: the policy
lab and set runs carry errors back from worker processes, where a class whose ``__init__``
takes other arguments than its message used to arrive as a TypeError."""

from __future__ import annotations

import errno
import pickle

import pytest

from solver.errors import SolverError, StorageFull, exit_code_for
from solver.proxy._http1 import Http1Error
from solver.proxy._parse import FrontError
from solver.store.errors import (
    BlobCorrupt,
    BlobMissing,
    CorruptionError,
    LockHeld,
    NotARun,
    RunExists,
    UnsafeEntry,
)
from solver.wire.errors import (
    ContextBelowFloor,
    HTTPStatusError,
    StreamProtocolError,
    TransportError,
)

RAISED: list[SolverError] = [
    StorageFull("runs/x/journal.jsonl", OSError(errno.ENOSPC, "No space left on device")),
    ContextBelowFloor(
        prompt_tokens=590, counted_by="counted", context_length=600, cap=10, floor=64
    ),
    HTTPStatusError("bad request", status=400, body_excerpt="{}", retry_after=1.5),
    StreamProtocolError("no [DONE]", kind="truncated", retryable=True),
    TransportError("reset", retryable=True, url="http://127.0.0.1:9/v1"),
    Http1Error("header too long", connected=True),
    FrontError(400, "messages missing"),
    BlobCorrupt("sha256:" + "0" * 64, "sha256:" + "1" * 64),
    BlobMissing("sha256:" + "2" * 64),
    CorruptionError(7, "hash chain broken"),
    LockHeld("runs/x", 123, "host"),
    NotARun("runs/x", "no MANIFEST.json"),
    RunExists("runs/x"),
    UnsafeEntry("runs/x/blobs", "a symbolic link"),
]


@pytest.mark.parametrize("error", RAISED, ids=lambda e: type(e).__name__)
def test_an_error_crosses_a_process_boundary_as_raised(error: SolverError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.args == error.args
    assert vars(copy).keys() == vars(error).keys()
    assert exit_code_for(copy) == exit_code_for(error)
