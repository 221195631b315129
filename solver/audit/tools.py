"""Audit check ``tools``: every python tool call a model made is run again in the sandbox,
under the limits it ran with, and must give the output recorded (docs/format.md, Tool
executions). An execution that gives two different outputs when run twice more, or that
was killed at its deadline, is not deterministic: a warning, not a failure. An output that
two new runs agree on and the record does not is a failure: the record is not what that code
gives. Without a sandbox on this machine the executions cannot be re-run: a warning."""

from __future__ import annotations

import json
from typing import Any

from solver.audit.base import AuditContext, Check, capped
from solver.audit.records import read_blob, records_of, row_about
from solver.errors import SandboxUnavailable
from solver.loop.tools import SHOWN_FIELDS
from solver.sandbox import (
    DEFAULT_PYTHON,
    DEFAULT_SANDBOX_UID,
    Limits,
    run_python,
    sandbox_version,
)


def _shown(record: dict[str, Any]) -> dict[str, Any]:
    return {name: record.get(name) for name in SHOWN_FIELDS}


def _sandbox_of(ctx: AuditContext) -> dict[str, Any]:
    """The run's own sandbox settings (bubblewrap, the interpreter inside, the uid), as its
    manifest recorded them: the executions are re-run with the same."""
    config = ctx.manifest.get("config", {}).get("resolved", {})
    sandbox = config.get("sandbox") if isinstance(config, dict) else None
    chosen = sandbox if isinstance(sandbox, dict) else {}
    return {
        "bwrap": str(chosen.get("bwrap", "bwrap")),
        "python": str(chosen.get("python", DEFAULT_PYTHON)),
        "uid": int(chosen.get("uid", DEFAULT_SANDBOX_UID)),
    }


def check_tools(ctx: AuditContext) -> list[Check]:
    executed = [r for r in records_of(ctx, "tool.executed") if r.data.get("status") == "ran"]
    if not executed:
        return []  # a run without tools: nothing to re-run, no row
    settings = _sandbox_of(ctx)
    try:
        version = sandbox_version(settings["bwrap"], settings["python"], settings["uid"]).as_dict()
    except SandboxUnavailable as exc:
        return [
            Check(
                name="tools",
                status="warn",
                detail=f"{len(executed)} tool executions not re-run: {exc}",
            )
        ]
    rows: list[Check] = []
    same = 0
    for rec in executed:
        data = rec.data
        which = f"{data['call_id']} tool call {data['index']}"
        try:
            code = read_blob(ctx, data["code"]["blob"]).decode("utf-8")
            recorded = _shown(json.loads(read_blob(ctx, data["result"]["blob"])))
            limits = Limits(**data["limits"])
        except (KeyError, TypeError, ValueError) as exc:
            rows.append(row_about(ctx, "tools", "fail", f"{which}: unreadable ({exc})", rec))
            continue
        again = _shown(run_python(code, limits, **settings).as_json())
        if again == recorded:
            same += 1
            continue
        other = data.get("sandbox") != version
        third = _shown(run_python(code, limits, **settings).as_json())
        if third != again or recorded["timed_out"] or again["timed_out"]:
            rows.append(
                row_about(
                    ctx,
                    "tools",
                    "warn",
                    f"{which}: not deterministic (another output each run); not compared",
                    rec,
                )
            )
        elif other:
            rows.append(
                row_about(
                    ctx,
                    "tools",
                    "warn",
                    f"{which}: another output in this sandbox ({version}) than in the run's "
                    f"({data.get('sandbox')})",
                    rec,
                )
            )
        else:
            rows.append(
                row_about(
                    ctx,
                    "tools",
                    "fail",
                    f"{which}: re-run twice, the code gives another output than recorded",
                    rec,
                )
            )
    if not rows:
        rows.append(
            Check(
                name="tools",
                status="pass",
                detail=f"{same} tool executions re-run in the sandbox gave the recorded output",
            )
        )
    return capped("tools", rows)
