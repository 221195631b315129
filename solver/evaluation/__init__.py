"""The face of solver.evaluation: what other packages import from it."""

from __future__ import annotations

from solver.evaluation.calibrate import (
    GradedProof,
    calibration_markdown,
    calibration_report,
    load_graded,
    write_calibration,
)
from solver.evaluation.evaluate import (
    EvalMonitor,
    Job,
    JobResult,
    drive_jobs,
    file_digest,
    prepare_out,
    quiet_progress,
    run_settings,
)
from solver.evaluation.output import results_json, results_markdown, score_line
from solver.evaluation.scores import (
    EvalSummary,
    RunScore,
    agreement,
    pearson,
    ranks,
    score_from_result,
    summarise,
)
from solver.evaluation.set_run import plan_counts, plan_set, served_model, write_set_results

__all__ = [
    "EvalMonitor",
    "EvalSummary",
    "GradedProof",
    "Job",
    "JobResult",
    "RunScore",
    "agreement",
    "calibration_markdown",
    "calibration_report",
    "drive_jobs",
    "file_digest",
    "load_graded",
    "pearson",
    "plan_counts",
    "plan_set",
    "prepare_out",
    "quiet_progress",
    "ranks",
    "results_json",
    "results_markdown",
    "run_settings",
    "score_from_result",
    "score_line",
    "served_model",
    "summarise",
    "write_calibration",
    "write_set_results",
]
