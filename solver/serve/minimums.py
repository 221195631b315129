"""The oldest SGLang release a deployment can run on, from the features its argv and model need.

"First release" is the first PyPI wheel whose own parser accepts the flag (checked release by
release; docs/serve.md, "Flag history"), so the floor is the newest of those first releases.
The gfx950 Block-FP8 image floor is a separate rule (``deployment_rules``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from solver.serve.deployment_rules import GFX950_FLOOR
from solver.serve.findings import Finding
from solver.serve.option_table import version_key
from solver.serve.recipe import Deployment

# option string -> first sampled SGLang release that accepts it
FLAG_FIRST_RELEASE: dict[str, str] = {
    "--attn-cp-size": "0.5.9",
    "--attention-context-parallel-size": "0.5.9",
    "--dsa-prefill-backend": "0.5.13",
    "--dsa-decode-backend": "0.5.13",
    "--dsa-topk-backend": "0.5.13",
    "--enable-prefill-cp": "0.5.14",
    "--cp-strategy": "0.5.14",
    "--enable-dsa-cache-layer-split": "0.5.16",
}

# model path pattern -> (first release with its architecture in stock SGLang, what it is)
MODEL_FIRST_RELEASE: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"glm-5\.3-flash", re.IGNORECASE), "0.5.20", "the glm5_next model"),
)


@dataclass(frozen=True)
class Minimum:
    version: str | None  # None: nothing in the deployment needs a particular release
    needs: tuple[str, ...]  # what sets the floor, e.g. "--enable-prefill-cp (0.5.14)"


def minimum_sglang(deployment: Deployment) -> Minimum:
    """The newest first-release over every feature the deployment uses."""
    found: dict[str, str] = {}
    for process in deployment.processes:
        if process.role == "router":
            continue
        for arg in process.argv:
            option = arg.split("=", 1)[0]
            if option in FLAG_FIRST_RELEASE:
                found[option] = FLAG_FIRST_RELEASE[option]
    for pattern, release, what in MODEL_FIRST_RELEASE:
        if pattern.search(deployment.recipe.model):
            found[what] = release
    if not found:
        return Minimum(None, ())
    floor = max(found.values(), key=version_key)
    needs = tuple(f"{what} ({release})" for what, release in found.items() if release == floor)
    return Minimum(floor, needs)


def describe(deployment: Deployment) -> list[str]:
    """Comment lines for `serve command`: the release floor and the Block-FP8 image floor."""
    lines: list[str] = []
    floor = minimum_sglang(deployment)
    if floor.version is not None:
        lines.append(f"needs SGLang >= {floor.version} for {', '.join(floor.needs)}")
    floor_text = gfx950_floor(deployment)
    if floor_text is not None:
        lines.append(f"gfx950 Block-FP8 image floor: {floor_text}")
    return lines


def gfx950_floor(deployment: Deployment) -> str | None:
    recipe = deployment.recipe
    return GFX950_FLOOR if recipe.vendor == "amd" and recipe.gpu_arch == "gfx950" else None


def floor_findings(deployment: Deployment) -> list[Finding]:
    """An error when the pinned release is older than the features the deployment uses."""
    floor = minimum_sglang(deployment)
    pinned = deployment.recipe.sglang_version
    if floor.version is None or version_key(pinned) >= version_key(floor.version):
        return []
    return [
        Finding(
            "error",
            "sglang-too-old",
            "sglang_version",
            f"SGLang {pinned} lacks {', '.join(floor.needs)}; pin {floor.version} or newer",
            deployment.recipe.name,
        )
    ]
