"""Standing the model up: SGLang recipes checked before they run, a supervisor, a numerics
canary, a concurrency benchmark (see serve/DESIGN.md; CLI ``solver serve``), and the protocol
proxy in ``solver.proxy``.

``bench``, ``canary`` and ``minimums`` are handed out as modules: their names (``render_table``
in both of the first two, ``minimums.describe``) mean something only beside their module."""

from solver.serve import bench, canary, minimums
from solver.serve.bench import BenchOptions, LevelResult, load_dataset, run_bench, summary_json
from solver.serve.canary import CanaryOptions, CanaryReport, ProbeResult, compare, run_canary
from solver.serve.launch import (
    LaunchPlan,
    pick_process,
    pip_requirements,
    plan_command,
    plan_recipe,
    run_plan,
)
from solver.serve.option_table import OptionTable, available_versions, load_table
from solver.serve.recipe import Deployment, ProcessCommand, Recipe, all_recipes, load_recipe, render
from solver.serve.supervisor import Event, Policy, ReadyInfo, Supervisor
from solver.serve.validate import Finding, errors_of, validate_args, validate_deployment

__all__ = [
    "BenchOptions",
    "CanaryOptions",
    "CanaryReport",
    "Deployment",
    "Event",
    "Finding",
    "LaunchPlan",
    "LevelResult",
    "OptionTable",
    "Policy",
    "ProbeResult",
    "ProcessCommand",
    "ReadyInfo",
    "Recipe",
    "Supervisor",
    "all_recipes",
    "available_versions",
    "bench",
    "canary",
    "compare",
    "errors_of",
    "load_dataset",
    "load_recipe",
    "load_table",
    "minimums",
    "pick_process",
    "pip_requirements",
    "plan_command",
    "plan_recipe",
    "render",
    "run_bench",
    "run_canary",
    "run_plan",
    "summary_json",
    "validate_args",
    "validate_deployment",
]
