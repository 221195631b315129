"""The face of solver.run: what other packages import from it."""

from __future__ import annotations

from solver.run.listing import RunRow, list_runs, read_run_row
from solver.run.manifest import build_manifest, manifest_blobs, read_manifest, settings_of_run
from solver.run.preflight import preflight
from solver.run.removal import check_removable, older_than, parse_age, remove_run
from solver.run.session import (
    ProgressFactory,
    RunOutcome,
    Seams,
    open_run,
    policy_config,
    read_state,
    resume_run,
    start_run,
    typed_record,
)
from solver.run.sources import resolve_endpoint, resume_endpoint, role_endpoints
from solver.run.status import RunCondition, run_condition, run_status, wall_seconds

__all__ = [
    "ProgressFactory",
    "RunCondition",
    "RunOutcome",
    "RunRow",
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
