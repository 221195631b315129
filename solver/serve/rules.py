"""Cross-flag rules that SGLang enforces only while resolving its arguments on a GPU host.

Each rule restates a check of SGLang's resolution code (cited) so a recipe fails here, on a
laptop, in milliseconds, instead of after a multi-minute start on eight GPUs.
"""

from __future__ import annotations

import re

from solver.serve.findings import Finding, ParsedArgs
from solver.serve.option_table import version_key

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
_GLM_NEW_TOOL_FORMAT = re.compile(r"GLM-(4\.7|5)", re.IGNORECASE)


def speculative_algorithms(version: str) -> tuple[str, ...]:
    """The names of the newest listed release not newer than ``version`` (else the oldest)."""
    listed = sorted(SPECULATIVE_ALGORITHMS_BY_VERSION, key=version_key)
    chosen = listed[0]
    for candidate in listed:
        if version_key(candidate) <= version_key(version):
            chosen = candidate
    return SPECULATIVE_ALGORITHMS_BY_VERSION[chosen]


class _Findings:
    """Collects the findings of one command line; every error names the SGLang version."""

    def __init__(self, version: str, process: str) -> None:
        self.version, self.process = version, process
        self.found: list[Finding] = []

    def error(self, rule: str, option: str, message: str) -> None:
        if self.version not in message:
            message += f" (SGLang {self.version})"
        self.found.append(Finding("error", rule, option, message, self.process))

    def warning(self, rule: str, option: str, message: str) -> None:
        self.found.append(Finding("warning", rule, option, message, self.process))


def server_rules(parsed: ParsedArgs, *, model: str, version: str, process: str) -> list[Finding]:
    out = _Findings(version, process)
    _layer_split_rules(parsed, out)
    _context_parallel_rules(parsed, out)
    _speculative_rules(parsed, out)
    _dsa_rules(parsed, out)
    _glm_parser_rules(parsed, model, out)
    _exposure_rules(parsed, out)
    if version_key(version) >= version_key("0.5.20") and parsed.has("enable_dp_attention"):
        out.warning("deprecated", "--enable-dp-attention", "deprecated; use --attn-dp-size")
    return out.found


def _layer_split_rules(parsed: ParsedArgs, out: _Findings) -> None:
    """model_hook.py (0.5.23) / server_args.py (0.5.16): the split needs a PD prefill worker."""
    if not parsed.has("enable_dsa_cache_layer_split"):
        return
    missing = []
    if parsed.text("disaggregation_mode", "null") != "prefill":
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
        out.error(
            "layer-split-needs-pd-prefill",
            "--enable-dsa-cache-layer-split",
            f"SGLang {out.version} refuses to start with it: it is only supported on PD prefill "
            "workers (non-PD workers also decode and need ordinary local decode-cache "
            f"semantics); missing {', '.join(missing)}. Fix: drop the flag for a single "
            "server (recipe glm52-fp8-mi355x) or run it as the prefill worker of a PD pair "
            "(recipe glm52-fp8-mi355x-pd). See sgl-project/sglang#32309.",
        )


def _context_parallel_rules(parsed: ParsedArgs, out: _Findings) -> None:
    """Prefill context parallelism (arg_groups parallel hooks, 0.5.14+)."""
    tp = parsed.integer("tp_size", 1)
    attn_cp = parsed.integer("attn_cp_size", 1)
    if parsed.has("attn_dp_size"):
        attn_dp = parsed.integer("attn_dp_size", 1)
    elif parsed.has("enable_dp_attention"):
        attn_dp = parsed.integer("dp_size", 1)
    else:
        attn_dp = 1
    prefill_cp = parsed.has("enable_prefill_cp")
    if prefill_cp and parsed.text("disaggregation_mode", "null") == "decode":
        out.error(
            "prefill-cp-on-decode",
            "--enable-prefill-cp",
            "rejected on a --disaggregation-mode decode worker; keep CP on the prefill worker",
        )
    if attn_cp > 1 or prefill_cp:
        if tp % (attn_dp * attn_cp) != 0:
            out.error(
                "cp-divisibility",
                "--attn-cp-size",
                f"tp-size {tp} must be divisible by attn-dp-size x attn-cp-size = "
                f"{attn_dp} x {attn_cp}; pick an attn-cp-size that divides {tp}",
            )
        if prefill_cp and tp > 8:
            out.error(
                "cp-max-tp",
                "--enable-prefill-cp",
                f"context parallelism needs tp-size <= 8, not {tp}",
            )
        if prefill_cp and attn_cp <= 1:
            out.warning(
                "cp-without-size",
                "--enable-prefill-cp",
                "attn-cp-size is 1, so prefill CP has nothing to split over; set --attn-cp-size",
            )
    if parsed.text("cp_strategy") == "zigzag":
        ep = parsed.integer("ep_size", 1)
        if parsed.text("moe_a2a_backend", "none") != "deepep" or ep != tp:
            # model_overrides/deepseek_v2.py: SGLang adjusts both and logs it, it does not refuse
            out.warning(
                "zigzag-adjusts-moe",
                "--cp-strategy",
                "zigzag makes SGLang switch to --moe-a2a-backend deepep and --ep-size equal to "
                "--tp-size; set both to say so, or use --cp-strategy interleave",
            )


def _speculative_rules(parsed: ParsedArgs, out: _Findings) -> None:
    """speculative_hook.py: algorithm names are free strings at parse time."""
    given = parsed.text("speculative_algorithm")
    if not given:
        for dest, option in (
            ("speculative_num_steps", "--speculative-num-steps"),
            ("speculative_num_draft_tokens", "--speculative-num-draft-tokens"),
        ):
            if parsed.has(dest):
                out.warning(
                    "speculative-unused", option, "has no effect without --speculative-algorithm"
                )
        return
    algorithm = given.upper()
    known = speculative_algorithms(out.version)
    if algorithm not in known:
        out.error(
            "speculative-algorithm",
            "--speculative-algorithm",
            f"{given!r} is not a built-in algorithm of SGLang {out.version} ({', '.join(known)})",
        )
    topk = parsed.integer("speculative_eagle_topk", 1)
    steps = parsed.integer("speculative_num_steps", -1)
    draft = parsed.integer("speculative_num_draft_tokens", -1)
    if algorithm in _CHAIN_ALGORITHMS and topk == 1 and steps > 0 and draft not in (-1, steps + 1):
        # SGLang adjusts the draft tokens and logs a warning; it does not refuse to start
        out.warning(
            "eagle-draft-tokens",
            "--speculative-num-draft-tokens",
            f"with --speculative-eagle-topk 1 SGLang resets draft tokens to steps + 1 = "
            f"{steps + 1}, not {draft}; write {steps + 1}",
        )


def _dsa_rules(parsed: ParsedArgs, out: _Findings) -> None:
    """A DSA backend without --kv-cache-dtype: SGLang 0.5.23 warns and picks a platform default
    (bf16 on gfx950), so the KV precision depends on where the recipe runs."""
    if (parsed.has("dsa_prefill_backend") or parsed.has("dsa_decode_backend")) and not parsed.has(
        "kv_cache_dtype"
    ):
        out.warning(
            "dsa-kv-cache-dtype",
            "--kv-cache-dtype",
            "DSA backends are set but the KV cache dtype is left to a per-platform default; "
            "set --kv-cache-dtype (bf16 is what gfx950 resolves to)",
        )


def _glm_parser_rules(parsed: ParsedArgs, model: str, out: _Findings) -> None:
    """GLM-4.7 and 5.x emit the <arg_key>/<arg_value> tool format only glm47 parses."""
    if not _GLM_NEW_TOOL_FORMAT.search(model):
        return
    parser = parsed.text("tool_call_parser")
    if parser != "glm47":
        out.error(
            "glm-tool-parser",
            "--tool-call-parser",
            f"{model} needs --tool-call-parser glm47 (got {parser or 'none'}): older GLM "
            "parsers leave its tool calls as raw text in content",
        )
    if parsed.text("reasoning_parser") not in ("glm45", "auto"):
        out.warning(
            "glm-reasoning-parser",
            "--reasoning-parser",
            f"{model} thinks by default; without --reasoning-parser glm45 its reasoning "
            "arrives inside content",
        )


def _exposure_rules(parsed: ParsedArgs, out: _Findings) -> None:
    if parsed.text("host") in ("0.0.0.0", "::"):
        out.warning(
            "binds-all", "--host", "listens on every interface; bind the address clients use"
        )
    if parsed.has("api_key"):
        out.warning(
            "api-key-in-argv",
            "--api-key",
            "a literal key in argv shows in `ps` and in /server_info; pass it at start-up "
            "(`solver serve up --api-key-env NAME`)",
        )


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
