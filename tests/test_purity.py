"""The pure packages import in a fresh interpreter where no network library can be loaded.

The import-linter contracts read the import graph; this reads what Python actually does,
parent packages' ``__init__`` included (a face that re-exports a client loads it for every
module below it, which a graph of explicit imports does not show). Each module is imported in
a child interpreter whose first meta-path finder refuses the HTTP stacks, and records every
attempt, so a ``try: import httpx`` that swallows the refusal fails too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The HTTP clients and servers the project or its dependencies use, and their I/O layers.
# The standard library's socket, ssl and asyncio stay: asyncio needs them, and they open
# nothing on import.
BLOCKED = (
    "httpx",
    "httpcore",
    "h11",
    "h2",
    "anyio",
    "sniffio",
    "uvicorn",
    "starlette",
    "httptools",
    "aiohttp",
    "requests",
    "urllib3",
    "websockets",
)

# What must load offline: what goes over the wire, the typed records, the audit (it reads a
# run's recorded bytes, never a network), the loop's state and policy (replay and decisions),
# the report and the run's readers (status, the journal fold, the run's face), the test
# doubles' face and those of them that speak only the wire, and the packages they stand on.
PURE = (
    "solver.wire",
    "solver.records",
    "solver.audit",
    "solver.loop.state",
    "solver.loop.policy",
    "solver.loop.contexts",
    "solver.store",
    "solver.roles",
    "solver.problems",
    "solver.answers",
    "solver.config",
    "solver.errors",
    "solver.report",
    "solver.run",
    "solver.run.status",
    "solver.run.journal",
    "solver.run.listing",
    "solver.testing",
    "solver.testing.fake_endpoint",
    "solver.testing.fake_wire",
    "solver.testing.fake_sglang",
    "solver.testing.lab_model",
    "solver.testing.virtual_gpu",
)

_CHILD = """
import importlib, importlib.abc, sys
blocked = set(sys.argv[2].split(","))
tried = []
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            tried.append(name)
            raise ImportError(f"{name} is blocked: a pure module must not load it")
        return None
sys.meta_path.insert(0, Refuse())
try:
    importlib.import_module(sys.argv[1])
except ImportError as error:
    sys.exit(f"{sys.argv[1]}: {error}")
if tried:
    sys.exit(f"{sys.argv[1]} tried to import {sorted(set(tried))}")
"""


def _import_blocked(module: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _CHILD, module, ",".join(BLOCKED)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("module", PURE)
def test_pure_module_imports_without_network_libraries(module: str) -> None:
    result = _import_blocked(module)
    assert result.returncode == 0, result.stderr.strip().splitlines()[-1:]


def test_the_run_face_hands_out_the_session_only_on_use() -> None:
    """The run's face is pure until a caller asks for what drives a run: then the session,
    and with it the model client, load (so the lazy face is not a face that lost them); and
    `preflight`, a function named like its module, is the function however it is imported."""
    code = (
        "import sys, solver.run as r; r.start_run; print('httpx' in sys.modules); "
        "from solver.run import preflight; print(callable(preflight)); "
        "import solver.run.preflight; from solver.run import preflight as again; "
        "print(callable(again))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "True"]


def test_the_blocker_refuses_the_model_client() -> None:
    """The same child fails on the client, which is built on httpx: the check can fail."""
    result = _import_blocked("solver.llm")
    assert result.returncode != 0
    assert "httpx is blocked" in result.stderr
