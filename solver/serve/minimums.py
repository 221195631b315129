"""The oldest SGLang release a deployment can run on, from the features its argv and model need.

A recipe's ``min_image`` only says which image first carries the gfx950 Block-FP8 fix; it is not
the oldest image that starts the recipe. The flags and model architectures below appeared in
later releases (research serving.md §1.2 and §0.6: "first seen" is the first sampled release
that has the flag, parse-tested where the research says so), so the real floor is the newest of
those first releases.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from solver.serve.option_table import version_key
from solver.serve.recipe import Deployment
from solver.serve.validate import Finding

# option string -> first sampled SGLang release that accepts it
FLAG_FIRST_RELEASE: dict[str, str] = {
    "--attn-cp-size": "0.5.10",
    "--attention-context-parallel-size": "0.5.10",
    "--dsa-prefill-backend": "0.5.13.post1",
    "--dsa-decode-backend": "0.5.13.post1",
    "--dsa-topk-backend": "0.5.13.post1",
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
    min_image = deployment.recipe.min_image
    if min_image:
        also = f" (an image must also carry SGLang >= {floor.version})" if floor.version else ""
        lines.append(f"oldest image with the gfx950 Block-FP8 fix: {min_image}{also}")
    return lines


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
