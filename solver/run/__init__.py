"""The face of solver.run: what other packages import from it.

Reading a run back (its manifest, its journal folded into state, its condition, the policy
its settings give, the listing and removal of runs) is pure and loads eagerly. Creating,
resuming and driving one (``start``, ``session``, ``drive``) and checking its endpoint first
(``preflight``) take the model client and its HTTP stack, so their names load on first use
(PEP 562): ``solver report``, ``solver status`` and the evaluation's readers import this face
without httpx.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from solver.run.journal import read_state, typed_record
from solver.run.listing import RunRow, list_runs, read_run_row
from solver.run.manifest import build_manifest, manifest_blobs, read_manifest, settings_of_run
from solver.run.policy_settings import policy_config
from solver.run.removal import check_removable, older_than, parse_age, remove_run
from solver.run.sources import resolve_endpoint, resume_endpoint, role_endpoints
from solver.run.status import RunCondition, RunStatus, run_condition, run_status, wall_seconds

if TYPE_CHECKING:
    from solver.run.drive import ProgressFactory, RunOutcome, Seams
    from solver.run.preflight import preflight
    from solver.run.session import open_run, resume_run
    from solver.run.start import start_run

# The names that drive a run or call its endpoint, from the modules that take the model client.
_LAZY = {
    "ProgressFactory": "solver.run.drive",
    "RunOutcome": "solver.run.drive",
    "Seams": "solver.run.drive",
    "open_run": "solver.run.session",
    "resume_run": "solver.run.session",
    "start_run": "solver.run.start",
    "preflight": "solver.run.preflight",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        # kept here: importing solver.run.preflight sets this package's `preflight` to the
        # submodule, which must not shadow the function of the same name
        value = globals()[name] = getattr(import_module(_LAZY[name]), name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ProgressFactory",
    "RunCondition",
    "RunOutcome",
    "RunRow",
    "RunStatus",
    "Seams",
    "build_manifest",
    "check_removable",
    "list_runs",
    "manifest_blobs",
    "older_than",
    "open_run",
    "parse_age",
    "policy_config",
    "preflight",
    "read_manifest",
    "read_run_row",
    "read_state",
    "remove_run",
    "resolve_endpoint",
    "resume_endpoint",
    "resume_run",
    "role_endpoints",
    "run_condition",
    "run_status",
    "settings_of_run",
    "start_run",
    "typed_record",
    "wall_seconds",
]
