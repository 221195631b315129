"""The face of solver.evaluation: what other packages import from it."""

from __future__ import annotations

from solver.evaluation.calibrate import (
    CalibrationPlan,
    GradedProof,
    calibration_figures,
    calibration_header,
    calibration_markdown,
    calibration_report,
    load_graded,
    plan_calibration,
    verification_lines,
    write_calibration,
)
from solver.evaluation.evaluate import (
    EVAL_GRADERS,
    EvalMonitor,
    Job,
    JobResult,
    drive_jobs,
    eval_settings,
    file_digest,
    prepare_out,
    quiet_progress,
    run_settings,
)
from solver.evaluation.output import Written, results_json, results_markdown, score_line
from solver.evaluation.scores import (
    EvalSummary,
    RunScore,
    agreement,
    pearson,
    ranks,
    score_from_result,
    summarise,
)
from solver.evaluation.set_run import (
    grading_line,
    plan_counts,
    plan_set,
    served_model,
    write_set_results,
)

__all__ = [
    "EVAL_GRADERS",
    "CalibrationPlan",
    "EvalMonitor",
    "EvalSummary",
    "GradedProof",
    "Job",
    "JobResult",
    "RunScore",
    "Written",
    "agreement",
    "calibration_figures",
    "calibration_header",
    "calibration_markdown",
    "calibration_report",
    "drive_jobs",
    "eval_settings",
    "file_digest",
    "grading_line",
    "load_graded",
    "pearson",
    "plan_calibration",
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
    "verification_lines",
    "write_calibration",
    "write_set_results",
]
