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
from solver.sandbox import Limits, run_python, sandbox_version


def _shown(record: dict[str, Any]) -> dict[str, Any]:
    return {name: record.get(name) for name in SHOWN_FIELDS}


def check_tools(ctx: AuditContext) -> list[Check]:
    executed = [r for r in records_of(ctx, "tool.executed") if r.data.get("status") == "ran"]
    if not executed:
        return []  # a run without tools: nothing to re-run, no row
    try:
        version = sandbox_version().as_dict()
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
        where = f"{data['call_id']} tool call {data['index']}"
        try:
            code = read_blob(ctx, data["code"]["blob"]).decode("utf-8")
            recorded = _shown(json.loads(read_blob(ctx, data["result"]["blob"])))
            limits = Limits(**data["limits"])
        except (KeyError, TypeError, ValueError) as exc:
            rows.append(row_about(ctx, "tools", "fail", f"{where}: unreadable ({exc})", rec))
            continue
        again = _shown(run_python(code, limits).as_json())
        if again == recorded:
            same += 1
            continue
        other = data.get("sandbox") != version
        third = _shown(run_python(code, limits).as_json())
        if third != again or recorded["timed_out"] or again["timed_out"]:
            rows.append(
                row_about(
                    ctx,
                    "tools",
                    "warn",
                    f"{where}: not deterministic (another output each run); not compared",
                    rec,
                )
            )
        elif other:
            rows.append(
                row_about(
                    ctx,
                    "tools",
                    "warn",
                    f"{where}: another output in this sandbox ({version}) than in the run's "
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
                    f"{where}: re-run twice, the code gives another output than recorded",
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
