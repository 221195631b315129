"""The face of solver.evaluation: what other packages import from it."""

from __future__ import annotations

from solver.evaluation.calibrate import (
    calibration_header,
    calibration_markdown,
    verification_lines,
    write_calibration,
)
from solver.evaluation.calibration_figures import calibration_figures
from solver.evaluation.calibration_runs import (
    CalibrationPlan,
    calibration_report,
    plan_calibration,
    rivals_of,
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
from solver.evaluation.export import (
    EXPORT_CHOICES,
    ExportedProof,
    ProofExport,
    collect_proofs,
    write_proofs,
)
from solver.evaluation.graded_file import GradedProof, load_graded
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
    default_out_dir,
    grading_line,
    plan_counts,
    plan_set,
    served_model,
    write_set_results,
)
from solver.evaluation.shard import (
    MergeReport,
    Shard,
    claim_eval_file,
    merge_set,
    shard_jobs,
    write_shard_state,
)

__all__ = [
    "EVAL_GRADERS",
    "EXPORT_CHOICES",
    "CalibrationPlan",
    "EvalMonitor",
    "EvalSummary",
    "ExportedProof",
    "GradedProof",
    "Job",
    "JobResult",
    "MergeReport",
    "ProofExport",
    "RunScore",
    "Shard",
    "Written",
    "agreement",
    "calibration_figures",
    "calibration_header",
    "calibration_markdown",
    "calibration_report",
    "claim_eval_file",
    "collect_proofs",
    "default_out_dir",
    "drive_jobs",
    "eval_settings",
    "file_digest",
    "grading_line",
    "load_graded",
    "merge_set",
    "pearson",
    "plan_calibration",
    "plan_counts",
    "plan_set",
    "prepare_out",
    "quiet_progress",
    "ranks",
    "results_json",
    "results_markdown",
    "rivals_of",
    "run_settings",
    "score_from_result",
    "score_line",
    "served_model",
    "shard_jobs",
    "summarise",
    "verification_lines",
    "write_calibration",
    "write_proofs",
    "write_set_results",
    "write_shard_state",
]
