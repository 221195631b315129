"""Cross-flag rules that SGLang enforces only while resolving its arguments on a GPU host.

Each rule restates a check of SGLang's resolution code (cited) so a recipe fails here, on a
laptop, in milliseconds, instead of after a multi-minute start on eight GPUs.
"""

from __future__ import annotations

import re

from solver.serve.option_table import version_key
from solver.serve.recipe import Deployment
from solver.serve.validate import Finding, ParsedArgs

# python/sglang/srt/speculative/spec_info.py: the SpeculativeAlgorithm members per release.
# SGLang upper-cases --speculative-algorithm before the lookup, so "nextn" is NEXTN.
_ALGORITHMS_0_5_19 = (
    "EAGLE",
    "EAGLE3",
    "NEXTN",
    "STANDALONE",
    "NGRAM",
    "DFLASH",
    "DSPARK",
    "FROZEN_KV_MTP",
)
SPECULATIVE_ALGORITHMS_BY_VERSION = {
    "0.5.19": _ALGORITHMS_0_5_19,
    "0.5.23": (*_ALGORITHMS_0_5_19, "UNO"),
}
SPECULATIVE_ALGORITHMS = SPECULATIVE_ALGORITHMS_BY_VERSION["0.5.23"]
_CHAIN_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN")
# The first ROCm image with the gfx950 Block-FP8 GEMM fix (sglang#28685, rocm-libraries#8639).
GFX950_FIXED_ROCM = 720
GFX950_FIXED_DATE = 20260618
GFX950_FIXED_IMAGE = "lmsysorg/sglang-rocm:v0.5.13.post1-rocm720-mi35x-20260618"
# Environment variables SGLang stopped reading: (release that dropped it, what replaced it).
REMOVED_ENV = {
    "SGLANG_ENABLE_SPEC_V2": ("0.5.14", "speculative decoding always uses the V2 worker"),
}
_GLM_NEW_TOOL_FORMAT = re.compile(r"GLM-(4\.7|5)", re.IGNORECASE)


def speculative_algorithms(version: str) -> tuple[str, ...]:
    """The names of the newest listed release not newer than ``version`` (else the oldest)."""
    listed = sorted(SPECULATIVE_ALGORITHMS_BY_VERSION, key=version_key)
    chosen = listed[0]
    for candidate in listed:
        if version_key(candidate) <= version_key(version):
            chosen = candidate
    return SPECULATIVE_ALGORITHMS_BY_VERSION[chosen]


def server_rules(parsed: ParsedArgs, *, model: str, version: str, process: str) -> list[Finding]:
    found: list[Finding] = []

    def error(rule: str, option: str, message: str) -> None:
        if version not in message:  # every error names the version it was checked against
            message += f" (SGLang {version})"
        found.append(Finding("error", rule, option, message, process))

    def warning(rule: str, option: str, message: str) -> None:
        found.append(Finding("warning", rule, option, message, process))

    mode = parsed.text("disaggregation_mode", "null")
    tp = parsed.integer("tp_size", 1)
    attn_cp = parsed.integer("attn_cp_size", 1)
    if parsed.has("attn_dp_size"):
        attn_dp = parsed.integer("attn_dp_size", 1)
    elif parsed.has("enable_dp_attention"):
        attn_dp = parsed.integer("dp_size", 1)
    else:
        attn_dp = 1

    # model_hook.py (0.5.23) / server_args.py (0.5.16): the layer split needs a PD prefill worker.
    if parsed.has("enable_dsa_cache_layer_split"):
        missing = []
        if mode != "prefill":
            missing.append("--disaggregation-mode prefill")
        if not parsed.has("enable_prefill_cp"):
            missing.append("--enable-prefill-cp")
        if parsed.text("cp_strategy") != "interleave":
            missing.append("--cp-strategy interleave")
        if parsed.text("disaggregation_transfer_backend", "mooncake") not in (
            "mooncake",
            "mooncake_tcp",
        ):
            missing.append("--disaggregation-transfer-backend mooncake|mooncake_tcp")
        if parsed.integer("pp_size", 1) != 1:
            missing.append("--pp-size 1")
        if missing:
            error(
                "layer-split-needs-pd-prefill",
                "--enable-dsa-cache-layer-split",
                f"SGLang {version} refuses to start with it: it is only supported on PD prefill "
                "workers (non-PD workers also decode and need ordinary local decode-cache "
                f"semantics); missing {', '.join(missing)}. Fix: drop the flag for a single "
                "server (recipe glm52-fp8-mi355x) or run it as the prefill worker of a PD pair "
                "(recipe glm52-fp8-mi355x-pd). See sgl-project/sglang#32309.",
            )

    # Prefill context parallelism (arg_groups/parallel hooks, 0.5.14+).
    if parsed.has("enable_prefill_cp") and mode == "decode":
        error(
            "prefill-cp-on-decode",
            "--enable-prefill-cp",
            "rejected on a --disaggregation-mode decode worker; keep CP on the prefill worker",
        )
    if attn_cp > 1 or parsed.has("enable_prefill_cp"):
        if tp % (attn_dp * attn_cp) != 0:
            error(
                "cp-divisibility",
                "--attn-cp-size",
                f"tp-size {tp} must be divisible by attn-dp-size x attn-cp-size = "
                f"{attn_dp} x {attn_cp}; pick an attn-cp-size that divides {tp}",
            )
        if parsed.has("enable_prefill_cp") and tp > 8:
            error(
                "cp-max-tp",
                "--enable-prefill-cp",
                f"context parallelism needs tp-size <= 8, not {tp}",
            )
        if parsed.has("enable_prefill_cp") and attn_cp <= 1:
            warning(
                "cp-without-size",
                "--enable-prefill-cp",
                "attn-cp-size is 1, so prefill CP has nothing to split over; set --attn-cp-size",
            )
    if parsed.text("cp_strategy") == "zigzag":
        ep = parsed.integer("ep_size", 1)
        if parsed.text("moe_a2a_backend", "none") != "deepep" or ep != tp:
            error(
                "zigzag-needs-deepep",
                "--cp-strategy",
                "zigzag forces --moe-a2a-backend deepep and --ep-size equal to --tp-size; set "
                "both or use --cp-strategy interleave",
            )

    # speculative_hook.py: algorithm names are free strings at parse time.
    given = parsed.text("speculative_algorithm")
    if given:
        algorithm = given.upper()
        known = speculative_algorithms(version)
        if algorithm not in known:
            error(
                "speculative-algorithm",
                "--speculative-algorithm",
                f"{given!r} is not a built-in algorithm of SGLang {version} ({', '.join(known)})",
            )
        topk = parsed.integer("speculative_eagle_topk", 1)
        steps = parsed.integer("speculative_num_steps", -1)
        draft = parsed.integer("speculative_num_draft_tokens", -1)
        if (
            algorithm in _CHAIN_ALGORITHMS
            and topk == 1
            and steps > 0
            and draft not in (-1, steps + 1)
        ):
            error(
                "eagle-draft-tokens",
                "--speculative-num-draft-tokens",
                f"with --speculative-eagle-topk 1 SGLang resets draft tokens to steps + 1 = "
                f"{steps + 1}, not {draft}; write {steps + 1}",
            )
    else:
        for dest, option in (
            ("speculative_num_steps", "--speculative-num-steps"),
            ("speculative_num_draft_tokens", "--speculative-num-draft-tokens"),
        ):
            if parsed.has(dest):
                warning(
                    "speculative-unused", option, "has no effect without --speculative-algorithm"
                )

    # GLM-4.7 and 5.x emit the <arg_key>/<arg_value> tool format only glm47 parses.
    if _GLM_NEW_TOOL_FORMAT.search(model):
        parser = parsed.text("tool_call_parser")
        if parser != "glm47":
            error(
                "glm-tool-parser",
                "--tool-call-parser",
                f"{model} needs --tool-call-parser glm47 (got {parser or 'none'}): older GLM "
                "parsers leave its tool calls as raw text in content",
            )
        if parsed.text("reasoning_parser") not in ("glm45", "auto"):
            warning(
                "glm-reasoning-parser",
                "--reasoning-parser",
                f"{model} thinks by default; without --reasoning-parser glm45 its reasoning "
                "arrives inside content",
            )
    if parsed.text("host") in ("0.0.0.0", "::"):
        warning("binds-all", "--host", "listens on every interface; bind the address clients use")
    if parsed.has("api_key"):
        warning(
            "api-key-in-argv",
            "--api-key",
            "a literal key in argv shows in `ps` and in /server_info; pass it at start-up "
            "(`solver serve up --api-key-env NAME`)",
        )
    if version_key(version) >= version_key("0.5.20") and parsed.has("enable_dp_attention"):
        warning("deprecated", "--enable-dp-attention", "deprecated; use --attn-dp-size")
    return found


def router_rules(parsed: ParsedArgs, *, process: str) -> list[Finding]:
    found: list[Finding] = []
    pd = parsed.has("pd_disaggregation")
    if pd and not (parsed.has("prefill") and parsed.has("decode")):
        found.append(
            Finding(
                "error",
                "router-pd-workers",
                "--pd-disaggregation",
                "needs at least one --prefill and one --decode worker",
                process,
            )
        )
    if not pd and not parsed.get("worker_urls"):
        found.append(
            Finding(
                "warning",
                "router-no-workers",
                "--worker-urls",
                "router starts with no workers",
                process,
            )
        )
    return found


def _url_key(url: str) -> str:
    return url.strip().rstrip("/").lower()


def deployment_rules(deployment: Deployment) -> list[Finding]:
    recipe = deployment.recipe
    found: list[Finding] = []

    def error(rule: str, option: str, message: str) -> None:
        found.append(Finding("error", rule, option, message, recipe.name))

    roles = [p.role for p in deployment.processes]
    pd_roles = {"prefill", "decode", "router"}
    if {"prefill", "decode"} & set(roles) and not pd_roles <= set(roles):
        error(
            "pd-incomplete", "--disaggregation-mode", "a PD recipe needs prefill, decode and router"
        )
    router = next((p for p in deployment.processes if p.role == "router"), None)
    if router is not None:
        # whole arguments, not a substring: http://h:3000 must not match http://h:30000
        routed = {_url_key(a.split("=", 1)[-1]) for a in router.argv}
        for process in deployment.processes:
            if process.role != "router" and _url_key(process.url) not in routed:
                error(
                    "router-misses-worker",
                    process.label,
                    f"the router does not route to {process.url} ({process.label})",
                )
    for process in deployment.processes:
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
        if "SGLANG_SIMULATE_ACC_LEN" in process.env:
            error(
                "simulated-acceptance",
                "SGLANG_SIMULATE_ACC_LEN",
                "synthetic speculative acceptance: never for real runs or benchmarks",
            )
    if recipe.vendor == "amd" and recipe.gpu_arch == "gfx950":
        found += _gfx950_image_rule(recipe.image, recipe.name)
        if recipe.min_image != GFX950_FIXED_IMAGE:
            error(
                "gfx950-min-image",
                "min_image",
                f"a gfx950 recipe must name {GFX950_FIXED_IMAGE} as its min_image (the first "
                "image with the Block-FP8 GEMM fix, sglang#28685)",
            )
    return found


def _gfx950_image_rule(image: str, where: str) -> list[Finding]:
    """The aiter bpreshuffle Block-FP8 GEMM was silently wrong on gfx950 with ROCm 7.2 builds
    before the fix: short prompts pass, long reasoning fails (sglang#28685)."""
    rocm = re.search(r"rocm(\d{3})", image)
    date = re.search(r"-(\d{8})$", image)
    if rocm is None or date is None:
        return [
            Finding(
                "warning",
                "gfx950-block-fp8",
                "image",
                f"cannot tell from {image!r} whether it carries the gfx950 Block-FP8 fix; build "
                f"on ROCm >= 7.2 dated {GFX950_FIXED_DATE} or later (first fixed: "
                f"{GFX950_FIXED_IMAGE}) and run `solver serve check`",
                where,
            )
        ]
    if int(rocm.group(1)) < GFX950_FIXED_ROCM or int(date.group(1)) < GFX950_FIXED_DATE:
        return [
            Finding(
                "error",
                "gfx950-block-fp8",
                "image",
                f"{image} predates the gfx950 Block-FP8 GEMM fix (sglang#28685: wrong rows near "
                f"tile boundaries, GSM8K 0.0); use {GFX950_FIXED_IMAGE} or newer",
                where,
            )
        ]
    return []
