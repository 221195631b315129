"""Recipes render to exact commands and pass validation against the real SGLang option tables;
known-bad command lines are rejected with the flag, the version and the fix."""

from __future__ import annotations

import dataclasses

import pytest

from solver.errors import ConfigError, InputError, NotFound
from solver.serve.option_table import available_versions, load_table
from solver.serve.recipe import EnvSpec, parse_recipe, recipe_names, render
from solver.serve.recipe import load_recipe as load
from solver.serve.validate import errors_of, validate_args, validate_deployment

REFERENCE_GLM52 = [
    "--model-path",
    "zai-org/GLM-5.2-FP8",
    "--tp",
    "8",
    "--dsa-prefill-backend",
    "tilelang",
    "--dsa-decode-backend",
    "tilelang",
    "--chunked-prefill-size",
    "131072",
    "--watchdog-timeout",
    "1200",
    "--reasoning-parser",
    "glm45",
    "--tool-call-parser",
    "glm47",
    "--attn-cp-size",
    "8",
    "--enable-prefill-cp",
    "--cp-strategy",
    "interleave",
    "--enable-dsa-cache-layer-split",
]

EXPECTED = {
    "glm52-fp8-mi355x",
    "glm52-fp8-mi355x-pd",
    "glm53-flash-mxfp4-mi355x",
    "glm53-flash-fp8-mi355x",
    "glm52-fp8-h200",
    "glm52-fp8-h200-multinode",
}


def test_the_issue_recipes_exist() -> None:
    assert set(recipe_names()) >= EXPECTED


@pytest.mark.parametrize("name", recipe_names())
def test_every_recipe_renders_and_validates(name: str) -> None:
    recipe = load(name)
    deployment = render(recipe)
    findings = validate_deployment(deployment)
    assert errors_of(findings) == [], [f.line() for f in findings]
    assert recipe.sglang_version in available_versions()
    for process in deployment.processes:
        assert process.container_argv[-len(process.argv) :] == process.argv
        assert recipe.image in process.container_argv
        assert "{" not in " ".join(process.argv), "unsubstituted variable"
    # every flag and variable of the recipe says why it is there
    for spec in recipe.processes:
        assert all(len(flag.why) > 10 for flag in spec.flags)
    assert all(len(env.why) > 10 for env in recipe.env)


def test_single_node_glm52_has_no_layer_split_but_pd_prefill_does() -> None:
    single = render(load("glm52-fp8-mi355x")).processes[0].argv
    assert "--enable-dsa-cache-layer-split" not in single
    assert "--enable-prefill-cp" in single
    pd = {p.role: p.argv for p in render(load("glm52-fp8-mi355x-pd")).processes}
    assert "--enable-dsa-cache-layer-split" in pd["prefill"]
    assert "--enable-dsa-cache-layer-split" not in pd["decode"]
    assert "--pd-disaggregation" in pd["router"]


@pytest.mark.parametrize("version", ["0.5.19", "0.5.23"])
def test_reference_glm52_line_with_layer_split_is_rejected(version: str) -> None:
    findings = validate_args(REFERENCE_GLM52, version, model="zai-org/GLM-5.2-FP8")
    errors = errors_of(findings)
    assert [e.rule for e in errors] == ["layer-split-needs-pd-prefill"]
    message = errors[0].line()
    assert "--enable-dsa-cache-layer-split" in message
    assert "PD prefill" in message and "--disaggregation-mode prefill" in message
    assert version in message
    # --tp only works as an argparse abbreviation: a warning naming the canonical spelling
    assert any(f.rule == "abbreviation" and "--tp-size" in f.message for f in findings)


def test_reference_line_as_pd_prefill_worker_passes() -> None:
    args = [*REFERENCE_GLM52, "--disaggregation-mode", "prefill"]
    assert errors_of(validate_args(args, "0.5.23", model="zai-org/GLM-5.2-FP8")) == []


def test_misspelt_flag_fails_with_suggestion() -> None:
    errors = errors_of(validate_args(["--chunked-prefil-size", "4096"], "0.5.23"))
    assert len(errors) == 1
    assert errors[0].option == "--chunked-prefil-size"
    assert "sglang 0.5.23" in errors[0].message
    assert "--chunked-prefill-size" in errors[0].message


def test_removed_and_ambiguous_flags() -> None:
    (nsa,) = errors_of(validate_args(["--nsa-prefill-backend", "tilelang"], "0.5.23"))
    assert nsa.rule == "removed-option" and "--dsa-prefill-backend" in nsa.message
    (cuda,) = errors_of(validate_args(["--cuda-graph-max-bs", "128"], "0.5.23"))
    assert cuda.rule == "ambiguous-prefix" and "--cuda-graph-max-bs-decode" in cuda.message
    # still a real option in 0.5.19
    assert errors_of(validate_args(["--cuda-graph-max-bs", "128"], "0.5.19")) == []


def test_flag_newer_than_pinned_version() -> None:
    newer = sorted(set(load_table("0.5.23").options) - set(load_table("0.5.19").options))
    switch = next(o for o in newer if not load_table("0.5.23").options[o].takes_value)
    (error,) = errors_of(validate_args([switch], "0.5.19"))
    assert error.rule == "option-too-new" and "0.5.23" in error.message


def test_values_choices_and_types() -> None:
    (choice,) = errors_of(validate_args(["--reasoning-parser", "glm47"], "0.5.23"))
    assert choice.rule == "bad-choice" and "glm45" in choice.message
    (kind,) = errors_of(validate_args(["--tp-size", "eight"], "0.5.23"))
    assert kind.rule == "bad-type"
    (missing,) = errors_of(validate_args(["--tp-size"], "0.5.23"))
    assert missing.rule == "missing-value"
    (switch,) = errors_of(validate_args(["--enable-metrics", "yes"], "0.5.23"))
    assert switch.rule in ("unexpected-value", "stray-value")
    warnings = validate_args(["--context-length", "1M"], "0.5.23")
    assert [w.rule for w in warnings] == ["size-suffix"]


def test_cross_flag_rules() -> None:
    def rules(args: str, model: str = "") -> list[str]:
        return [e.rule for e in errors_of(validate_args(args.split(), "0.5.23", model=model))]

    assert rules("--tp-size 8 --attn-cp-size 3 --enable-prefill-cp") == ["cp-divisibility"]
    assert "prefill-cp-on-decode" in rules(
        "--tp-size 8 --attn-cp-size 8 --enable-prefill-cp --disaggregation-mode decode"
    )
    assert rules("--speculative-algorithm EAGEL") == ["speculative-algorithm"]
    assert rules("--tool-call-parser glm45", model="zai-org/GLM-5.2-FP8") == ["glm-tool-parser"]


def test_what_sglang_adjusts_with_a_warning_is_a_warning_here() -> None:
    def warnings(args: str) -> list[str]:
        found = validate_args(args.split(), "0.5.23")
        assert errors_of(found) == []  # SGLang starts with these
        return [f.rule for f in found if f.severity == "warning"]

    # EAGLE top-k 1: SGLang resets draft tokens to steps + 1 and logs it
    assert warnings(
        "--speculative-algorithm EAGLE --speculative-num-steps 5 "
        "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
    ) == ["eagle-draft-tokens"]
    # zigzag: SGLang switches the MoE all-to-all backend and the EP size itself
    assert warnings("--tp-size 8 --cp-strategy zigzag") == ["zigzag-adjusts-moe"]
    assert warnings("--tp-size 8 --cp-strategy zigzag --moe-a2a-backend deepep --ep-size 8") == []
    # DSA backends without a KV dtype: the precision would follow the platform default
    assert warnings("--dsa-prefill-backend tilelang --dsa-decode-backend tilelang") == [
        "dsa-kv-cache-dtype"
    ]
    assert warnings("--dsa-decode-backend tilelang --kv-cache-dtype bf16") == []


def test_flags_of_older_tables_get_a_fix() -> None:
    # present in the 0.5.19 table, gone from 0.5.23, and not in RENAMED
    (stream,) = errors_of(validate_args(["--stream-output"], "0.5.23"))
    assert stream.rule == "removed-option"
    assert "0.5.19" in stream.message and "--incremental-streaming-output" in stream.message
    (mode,) = errors_of(validate_args(["--prefill-cp-mode", "in-seq-split"], "0.5.23"))
    assert mode.rule == "removed-option" and "0.5.19" in mode.message
    (bs,) = errors_of(validate_args(["--cuda-graph-bs", "8", "16"], "0.5.23"))
    assert bs.rule == "ambiguous-prefix" and "removed" in bs.message
    assert "use --cuda-graph-bs-decode" in bs.message
    # still valid where it exists
    assert errors_of(validate_args(["--stream-output"], "0.5.19")) == []


def test_router_must_name_each_worker_url_exactly() -> None:
    deployment = render(load("glm52-fp8-mi355x-pd"))
    assert errors_of(validate_deployment(deployment)) == []
    prefill = next(p for p in deployment.processes if p.role == "prefill")
    # the router names a URL of which the worker's is only a prefix
    wrong = prefill.url + "1"
    processes = tuple(
        dataclasses.replace(p, argv=tuple(wrong if a == prefill.url else a for a in p.argv))
        if p.role == "router"
        else p
        for p in deployment.processes
    )
    broken = dataclasses.replace(deployment, processes=processes)
    rules = [e.rule for e in errors_of(validate_deployment(broken))]
    assert rules == ["router-misses-worker"]


def test_speculative_algorithm_names_per_version() -> None:
    def rules(args: str, version: str) -> list[str]:
        return [e.rule for e in errors_of(validate_args(args.split(), version))]

    # SGLang upper-cases the name, so lower case is valid
    assert rules("--speculative-algorithm nextn", "0.5.23") == []
    assert rules("--speculative-algorithm FROZEN_KV_MTP", "0.5.19") == []
    assert rules("--speculative-algorithm FROZEN_KV_MTP", "0.5.23") == []
    assert rules("--speculative-algorithm UNO", "0.5.23") == []
    (uno,) = errors_of(validate_args(["--speculative-algorithm", "UNO"], "0.5.19"))
    assert uno.rule == "speculative-algorithm" and "0.5.19" in uno.message
    # the draft-token rule applies to the upper-cased name
    found = validate_args(
        [
            "--speculative-algorithm",
            "nextn",
            "--speculative-num-steps",
            "5",
            "--speculative-eagle-topk",
            "1",
            "--speculative-num-draft-tokens",
            "4",
        ],
        "0.5.23",
    )
    assert [f.rule for f in found] == ["eagle-draft-tokens"]


@pytest.mark.parametrize(
    ("image", "why"),
    [
        ("lmsysorg/sglang-rocm:v0.5.13-rocm720-mi35x-20260601", "SGLang 0.5.13"),
        # the image PR #28471 measured GSM8K 0.000 on
        ("lmsysorg/sglang-rocm:v0.5.13.post1-rocm720-mi35x-20260618", "built 20260618"),
        # dated after the kernel fix, but without SGLang's own fix (first in 0.5.15)
        ("lmsysorg/sglang-rocm:v0.5.14-rocm720-mi35x-20260630", "SGLang 0.5.14"),
        ("lmsysorg/sglang-rocm:v0.5.19-rocm700-mi35x-20260910", "ROCm 700"),
    ],
)
def test_images_without_both_block_fp8_fixes_are_rejected_for_gfx950(image: str, why: str) -> None:
    old = load("glm52-fp8-mi355x").model_copy(update={"image": image})
    errors = errors_of(validate_deployment(render(old)))
    assert [e.rule for e in errors] == ["gfx950-block-fp8"]
    assert "28685" in errors[0].message and why in errors[0].message
    assert "0.5.15" in errors[0].message and "8639" in errors[0].message


def test_an_image_with_both_fixes_passes_and_an_unreadable_tag_warns() -> None:
    good = load("glm52-fp8-mi355x").model_copy(
        update={"image": "lmsysorg/sglang-rocm:v0.5.15-rocm720-mi35x-20260714"}
    )
    assert errors_of(validate_deployment(render(good))) == []
    custom = load("glm52-fp8-mi355x").model_copy(update={"image": "localhost/my-build:latest"})
    found = validate_deployment(render(custom))
    assert errors_of(found) == []
    assert "gfx950-block-fp8" in [f.rule for f in found if f.severity == "warning"]


def test_set_overrides() -> None:
    recipe = load("glm52-fp8-mi355x")
    argv = render(recipe, ["port=31000", "enable-prefill-cp=false", "max-running-requests=64"])
    line = argv.processes[0].argv
    assert line[line.index("--port") + 1] == "31000"
    assert "--enable-prefill-cp" not in line
    assert line[line.index("--max-running-requests") + 1] == "64"
    assert argv.processes[0].url == "http://127.0.0.1:31000"
    overrides = ["prefill_host=127.0.0.2", "decode.mem-fraction-static=0.9"]
    pd = render(load("glm52-fp8-mi355x-pd"), overrides)
    by_role = {p.role: p for p in pd.processes}
    assert "http://127.0.0.2:30000" in by_role["router"].argv
    decode = by_role["decode"].argv
    assert decode[decode.index("--mem-fraction-static") + 1] == "0.9"
    prefill = by_role["prefill"].argv
    assert prefill[prefill.index("--mem-fraction-static") + 1] == "0.80"
    assert errors_of(validate_deployment(pd)) == []


def test_set_can_introduce_an_error_that_validation_catches() -> None:
    deployment = render(load("glm52-fp8-mi355x"), ["enable-dsa-cache-layer-split=true"])
    assert [e.rule for e in errors_of(validate_deployment(deployment))] == [
        "layer-split-needs-pd-prefill"
    ]


@pytest.mark.parametrize("bad", ["noequals", "=3", "nosuch.tp-size=3", "BAD KEY=1"])
def test_bad_set_is_an_input_error(bad: str) -> None:
    with pytest.raises(InputError):
        render(load("glm52-fp8-mi355x"), [bad])


def test_unknown_recipe_and_bad_recipe_file() -> None:
    with pytest.raises(NotFound, match="glm52-fp8-mi355x"):
        load("no-such-recipe")
    with pytest.raises(ConfigError, match="why"):
        parse_recipe(
            'name="x"\ntitle="t"\nmodel="m"\nserved_model_name="m"\nhardware="h"\n'
            'vendor="amd"\ngpu_arch="gfx950"\nsglang_version="0.5.23"\nimage="i"\nstatus="s"\n'
            '[[process]]\n[[process.flag]]\nname="--tp-size"\nvalue="8"\n',
            "inline",
        )


def test_every_recipe_sets_the_health_check_timeout_below_the_supervisors_deep_probe() -> None:
    from solver.serve.launch import plan_recipe

    for name in recipe_names():
        deployment = render(load(name))
        for process in deployment.processes:
            if process.role == "router":
                continue
            assert "SGLANG_HEALTH_CHECK_TIMEOUT" in process.env, (name, process.label)
            plan = plan_recipe(deployment, process, check_version=False)
            policy = plan.policy(None)
            assert policy.health_check_timeout == float(process.env["SGLANG_HEALTH_CHECK_TIMEOUT"])
            assert policy.deep_timeout > policy.health_check_timeout
            # the hang window is the server's own watchdog
            watchdog = process.argv[process.argv.index("--watchdog-timeout") + 1]
            assert policy.hang_after == float(watchdog)


def test_glm_recipes_accept_the_solvers_thinking_budget_processor() -> None:
    for name in recipe_names():
        for process in render(load(name)).processes:
            if process.role != "router":
                assert "--enable-custom-logit-processor" in process.argv, (name, process.label)


def test_routers_outlast_the_longest_stream() -> None:
    # 262144 output tokens at 30 tok/s per user, the slow end the recipes serve
    longest = 262144 / 30
    for name in recipe_names():
        for process in render(load(name)).processes:
            if process.role == "router":
                timeout = float(process.argv[process.argv.index("--request-timeout-secs") + 1])
                assert timeout > longest, name


def test_removed_environment_variable_is_flagged() -> None:
    recipe = load("glm52-fp8-h200")
    extra = EnvSpec(name="SGLANG_ENABLE_SPEC_V2", value="1", why="an old cookbook tip")
    old_tip = recipe.model_copy(update={"env": [*recipe.env, extra]})
    findings = validate_deployment(render(old_tip))
    assert [(f.rule, f.severity) for f in findings] == [("removed-env", "warning")]
    assert "0.5.14" in findings[0].message


def test_set_model_points_every_process_at_a_local_copy() -> None:
    deployment = render(load("glm52-fp8-mi355x-pd"), ["model=/models/GLM-5.2-FP8"])
    for process in deployment.processes:
        if process.role != "router":
            argv = process.argv
            assert argv[argv.index("--model-path") + 1] == "/models/GLM-5.2-FP8"
    assert errors_of(validate_deployment(deployment)) == []


@pytest.mark.parametrize(
    ("name", "overrides", "floor", "needs"),
    [
        ("glm52-fp8-mi355x", [], "0.5.14", "--enable-prefill-cp (0.5.14)"),
        ("glm52-fp8-mi355x-pd", [], "0.5.16", "--enable-dsa-cache-layer-split (0.5.16)"),
        ("glm53-flash-mxfp4-mi355x", [], "0.5.20", "the glm5_next model (0.5.20)"),
        (
            "glm52-fp8-mi355x",
            ["enable-prefill-cp=false", "cp-strategy=false"],
            "0.5.13",
            "--dsa-prefill-backend (0.5.13)",
        ),
    ],
)
def test_the_release_floor_follows_the_features_the_argv_uses(
    name: str, overrides: list[str], floor: str, needs: str
) -> None:
    from solver.serve.minimums import minimum_sglang

    found = minimum_sglang(render(load(name), overrides))
    assert found.version == floor and needs in found.needs


def test_a_pin_older_than_the_release_floor_is_an_error() -> None:
    from solver.serve.minimums import floor_findings

    deployment = render(load("glm52-fp8-mi355x"))
    assert floor_findings(deployment) == []
    old = dataclasses.replace(
        deployment, recipe=deployment.recipe.model_copy(update={"sglang_version": "0.5.13"})
    )
    (finding,) = floor_findings(old)
    assert finding.severity == "error" and finding.rule == "sglang-too-old"
    assert "--enable-prefill-cp" in finding.message and "pin 0.5.14" in finding.message


def test_the_router_lines_parse_on_smg_and_on_sglang_router_alike() -> None:
    # the evaluation behind choosing smg: both recipe router lines pass both parsers unchanged
    for name in ("glm52-fp8-mi355x-pd", "glm52-fp8-h200-multinode"):
        deployment = render(load(name))
        (router,) = [p for p in deployment.processes if p.role == "router"]
        assert router.argv[: router.launcher_len] == ("python3", "-m", "smg.launch_router")
        args = list(router.argv[router.launcher_len :])
        assert errors_of(validate_args(args, "1.13.0", tool="smg")) == []
        assert errors_of(validate_args(args, "0.3.2", tool="sglang-router")) == []


def test_the_redundant_top_k_switch_on_rocm_is_flagged() -> None:
    recipe = load("glm52-fp8-mi355x")
    extra = [*recipe.env, {"name": "SGLANG_OPT_USE_TOPK_V2", "value": "false", "why": "x" * 3}]
    patched = type(recipe).model_validate(recipe.model_dump(by_alias=True) | {"env": extra})
    found = validate_deployment(render(patched))
    assert errors_of(found) == []
    assert "redundant-env" in [f.rule for f in found]
