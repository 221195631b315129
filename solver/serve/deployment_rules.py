"""Rules over a whole rendered recipe: the processes fit together (PD roles, the router's
worker list), the environment, and the image floor for gfx950."""

from __future__ import annotations

import re

from solver.serve.findings import Finding
from solver.serve.option_table import version_key
from solver.serve.recipe import Deployment, ProcessCommand, Recipe

# The gfx950 Block-FP8 GEMM bug (sglang#28685: GSM8K 0.000 on a v0.5.13.post1-rocm720-mi35x
# image, sglang#28471) needs two fixes: the kernel (ROCm/rocm-libraries#8639, merged 2026-06-19)
# and SGLang's scale layout (sglang#29275, first in the 0.5.15 wheel). An image passes only when
# its tag shows all three: SGLang >= 0.5.15, ROCm >= 7.2, built on or after the kernel fix.
GFX950_FIXED_SGLANG = "0.5.15"
GFX950_FIXED_ROCM = 720
GFX950_FIXED_DATE = 20260619
GFX950_FLOOR = (
    f"SGLang >= {GFX950_FIXED_SGLANG} (sglang#29275) on ROCm >= 7.2 built {GFX950_FIXED_DATE} or "
    "later (ROCm/rocm-libraries#8639)"
)
# Environment variables SGLang stopped reading: (release that dropped it, what replaced it).
REMOVED_ENV = {
    "SGLANG_ENABLE_SPEC_V2": ("0.5.14", "speculative decoding always uses the V2 worker"),
}


def _url_key(url: str) -> str:
    return url.strip().rstrip("/").lower()


def deployment_rules(deployment: Deployment) -> list[Finding]:
    recipe = deployment.recipe
    found = _topology_rules(deployment)
    for process in deployment.processes:
        found += _env_rules(recipe, process)
    if recipe.vendor == "amd" and recipe.gpu_arch == "gfx950":
        found += _gfx950_image_rule(recipe.image, recipe.name)
    return found


def _topology_rules(deployment: Deployment) -> list[Finding]:
    """A PD recipe has all three roles, and its router routes to every worker."""
    where = deployment.recipe.name
    found: list[Finding] = []
    roles = [p.role for p in deployment.processes]
    pd_roles = {"prefill", "decode", "router"}
    if {"prefill", "decode"} & set(roles) and not pd_roles <= set(roles):
        found.append(
            Finding(
                "error",
                "pd-incomplete",
                "--disaggregation-mode",
                "a PD recipe needs prefill, decode and router",
                where,
            )
        )
    router = next((p for p in deployment.processes if p.role == "router"), None)
    if router is not None:
        # whole arguments, not a substring: http://h:3000 must not match http://h:30000
        routed = {_url_key(a.split("=", 1)[-1]) for a in router.argv}
        for process in deployment.processes:
            if process.role != "router" and _url_key(process.url) not in routed:
                found.append(
                    Finding(
                        "error",
                        "router-misses-worker",
                        process.label,
                        f"the router does not route to {process.url} ({process.label})",
                        where,
                    )
                )
    return found


def _env_rules(recipe: Recipe, process: ProcessCommand) -> list[Finding]:
    """The environment of one process: variables SGLang dropped or already implies, and
    switches that must never reach a real run."""
    found: list[Finding] = []
    for name in process.env:
        removed = REMOVED_ENV.get(name)
        if removed and version_key(recipe.sglang_version) >= version_key(removed[0]):
            found.append(
                Finding(
                    "warning",
                    "removed-env",
                    name,
                    f"ignored since SGLang {removed[0]} ({removed[1]})",
                    recipe.name,
                )
            )
    if recipe.vendor == "amd" and process.env.get("SGLANG_OPT_USE_TOPK_V2") == "false":
        # arg_groups/model_hook.py (0.5.23, HIP arm; 0.5.19 likewise): off by default on
        # HIP for DSA models already
        found.append(
            Finding(
                "warning",
                "redundant-env",
                "SGLANG_OPT_USE_TOPK_V2",
                "SGLang already turns the top-k v2 kernel off for DSA models on ROCm",
                recipe.name,
            )
        )
    if "SGLANG_SIMULATE_ACC_LEN" in process.env:
        found.append(
            Finding(
                "error",
                "simulated-acceptance",
                "SGLANG_SIMULATE_ACC_LEN",
                "synthetic speculative acceptance: never for real runs or benchmarks",
                recipe.name,
            )
        )
    return found


def _gfx950_image_rule(image: str, where: str) -> list[Finding]:
    """The aiter bpreshuffle Block-FP8 GEMM was silently wrong on gfx950 before both fixes:
    short prompts pass, long reasoning fails (sglang#28685)."""
    version = re.search(r":v(\d+\.\d+\.\d+(?:\.post\d+)?)", image)
    rocm = re.search(r"rocm(\d{3})", image)
    date = re.search(r"-(\d{8})$", image)
    if version is None or rocm is None or date is None:
        return [
            Finding(
                "warning",
                "gfx950-block-fp8",
                "image",
                f"cannot tell from {image!r} whether it carries the gfx950 Block-FP8 fixes "
                f"({GFX950_FLOOR}); run `solver serve check` before trusting it",
                where,
            )
        ]
    too_old = []
    if version_key(version.group(1)) < version_key(GFX950_FIXED_SGLANG):
        too_old.append(f"SGLang {version.group(1)}")
    if int(rocm.group(1)) < GFX950_FIXED_ROCM:
        too_old.append(f"ROCm {rocm.group(1)}")
    if int(date.group(1)) < GFX950_FIXED_DATE:
        too_old.append(f"built {date.group(1)}")
    if not too_old:
        return []
    return [
        Finding(
            "error",
            "gfx950-block-fp8",
            "image",
            f"{image} ({', '.join(too_old)}) predates the gfx950 Block-FP8 GEMM fixes "
            f"(sglang#28685: wrong rows near tile boundaries, GSM8K 0.0); needs {GFX950_FLOOR}",
            where,
        )
    ]
