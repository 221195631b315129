"""One settings model, resolved from four layers.

Precedence, lowest first: built-in defaults < ``solver.toml`` in the working directory (or
``--config FILE``) < environment variables < command-line flags. Every resolved value remembers
the layer it came from, so ``solver config show`` can say why a value is what it is.
"""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from solver._util.masking import MASK, mask_url, url_problem
from solver._util.terminal import one_line
from solver.errors import ConfigError

__all__ = ["MASK", "mask_url"]  # re-exported: callers mask endpoint URLs through config

# "checker": the model that runs the later checks of accepted proofs (the final and recheck
# rounds) when ``roles.checker.endpoint`` names one, a verifier of another family; without an
# endpoint it is unused and those checks are verifier calls (docs/roles.md, Checker).
CHECKER = "checker"
ROLE_NAMES = ("generator", "verifier", "reviewer", "reviser", "grader", "selector", CHECKER)
# The final round a checker runs when acceptance.final_verifications is not set: the policy
# lab measured 5 and 10 (docs/bench-policy.md, "A checker of another family"); 5 scored as
# well for less decode.
CHECKER_FINAL_VERIFICATIONS = 5
DEFAULT_CONFIG_FILE = "solver.toml"
MAX_CONFIG_BYTES = 1024 * 1024
ApiName = Literal["chat", "responses", "anthropic"]


class _Section(BaseModel):
    # inf and NaN are no durations or budgets: `connect_s = inf` must fail here, not later.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# Sampling as the public GLM-5 evaluations run it (docs/roles.md, Sampling): sent in every
# request, so a run can say what it sampled with. None (only in manifests of runs made
# before sampling was explicit) leaves the server's default.
DEFAULT_TEMPERATURE = 1.0
DEFAULT_TOP_P = 0.95
# The floor of a call's output cap under a token budget (docs/roles.md, Sampling). 1: any
# cap starts the call, as before the floor existed; the policy lab measured 4096 (about one
# visible proof) and did not show it better (docs/bench-policy.md), so the default stays.
DEFAULT_MIN_TOKENS = 1


class RoleSettings(_Section):
    temperature: float | None = Field(default=DEFAULT_TEMPERATURE, ge=0.0, le=2.0)
    top_p: float | None = Field(default=DEFAULT_TOP_P, gt=0.0, le=1.0)
    max_tokens: int = Field(default=256_000, ge=1)
    # Under a token budget, the fewest output tokens a call may start with (no more than
    # max_tokens): a call capped below it could not write even a short answer, so it waits
    # for tokens promised to calls in flight, or the budget has ended.
    min_tokens: int = Field(default=DEFAULT_MIN_TOKENS, ge=1)
    # Tokens of reasoning before the server forces the answer (SGLang's thinking-budget
    # logit processor); None: no budget, only max_tokens bounds a call.
    thinking_budget: int | None = Field(default=None, ge=1)
    # The prompt variants the role's calls take in turn (generator and verifier only; the
    # verifier's apply to a checker's verifications too); None: every variant that ships.
    variants: list[str] | None = Field(default=None, min_length=1, max_length=16)
    reasoning: bool | None = None
    # Another endpoint (and model family) for this role; None: the run's own endpoint.
    endpoint: str | None = None
    api: ApiName | None = None  # default: the run's api
    model: str | None = None  # default: what that endpoint serves
    # The name of the environment variable holding that endpoint's key (never the key).
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
    # Tools the role's calls are offered through the protocol's native tool calling: "python"
    # runs the model's code in the sandbox ([sandbox]). Off for every role by default: it
    # changes every request and every verdict, and the policy lab has not yet measured it
    # (docs/sandbox.md, The python tool).
    tools: list[Literal["python"]] = Field(default_factory=list, max_length=1)
    # The most tool calls one call of the role may make; then it must answer.
    max_tool_calls: int = Field(default=8, ge=1, le=64)


def _default_roles() -> dict[str, RoleSettings]:
    return {name: RoleSettings() for name in ROLE_NAMES}


class Acceptance(_Section):
    verifications: int = Field(default=5, ge=1, description="K: passing verifications needed")
    accepted_needed: int = Field(default=2, ge=1, description="A: accepted lineages to stop")
    max_failed_rounds: int = Field(default=10, ge=1, description="rounds before abandoning")
    abandon_on_recurring: bool = Field(
        default=True, description="abandon a lineage when a confirmed finding recurs"
    )
    max_lineages: int | None = Field(
        default=None, ge=1, description="lineages started in all (default 3 x candidates)"
    )
    lineages_follow_budget: bool = Field(
        default=True,
        description="with a budget set and no max_lineages, start lineages while it lasts",
    )
    reverify_no_verdict: bool = Field(
        default=True, description="issue a verification that gave no verdict again"
    )
    max_verifications: int | None = Field(
        default=None, ge=1, description="verifications of one version, reissues included (2 x K)"
    )
    overturned_fail_passes: bool = Field(
        default=False, description="a fail whose findings were all rejected counts as a pass"
    )
    verify_stage: int = Field(
        default=2, ge=0, description="verifications asked first; the rest only if they pass"
    )
    cancel_on_blocking: bool = Field(
        default=True, description="cancel a version's verifications once one has failed it"
    )
    review: bool = Field(
        default=True,
        description="a reviewer checks the findings of each failing report (False: they "
        "stand as reported, as in pipelines without one)",
    )
    review_minor_on_pass: bool = Field(
        default=False, description="review passing reports whose findings are all minor"
    )
    recurrence_rounds: int = Field(
        default=2, ge=1, description="consecutive rounds a confirmed finding recurs to abandon"
    )
    focus_after_accept: int = Field(
        default=0,
        ge=0,
        description="once a lineage is accepted, only this many others (the furthest along) "
        "go on at a time (0: all)",
    )
    minor_blocks: bool = Field(
        default=False,
        description="a report with any finding, minor included, does not pass its proof (as "
        "DeepSeek-Math-V2 scores minor errors 0.5 and accepts only a mean score of 1)",
    )
    fill_slots: bool = Field(
        default=False,
        description="start lineages beyond candidates while fewer calls than concurrency are "
        "in flight, so the server is kept busy whenever work could be ready",
    )
    start_lineages: int = Field(
        default=0,
        ge=0,
        description="lineages side by side until a round fails (0: candidates from the start)",
    )
    best_version: bool = Field(
        default=True, description="revise from and submit each lineage's best version"
    )
    self_improve: bool = Field(
        default=False,
        description="a fresh proof gets a second generator turn (check and improve) first",
    )
    refine_from_pool: bool = Field(
        default=False,
        description="a failed round is revised from the best proof of the whole search "
        "(every lineage's), not the lineage's own",
    )
    restart_from_pool: bool = Field(
        default=False,
        description="restarts take turns with revising an abandoned lineage's best proof",
    )
    recombine: int = Field(
        default=0,
        ge=0,
        le=4,
        description="restarts take turns with recombining the best proofs of this many "
        "lineages (2-4; 0: never)",
    )
    # Final checks and selection (issue 19, points 4 and 9; docs/bench-policy.md measures them)
    final_verifications: int | None = Field(
        default=None,
        ge=0,
        description="a last, larger round for each accepted proof (0 = off; default: "
        f"{CHECKER_FINAL_VERIFICATIONS} when roles.checker.endpoint is set, else 0)",
    )
    recheck_answers: bool = Field(
        default=True, description="accepted proofs with different final answers are re-verified"
    )
    answers_agree: bool = Field(
        default=True,
        description="stop only on accepted_needed accepted proofs stating one final answer; "
        "the others are then no longer accepted",
    )
    pairwise_selection: bool = Field(
        default=False, description="choose by pairwise comparisons in both orders (a bracket)"
    )
    final_grades: int = Field(
        default=1, ge=1, le=15, description="grades of each final proof when none is accepted"
    )

    @field_validator("recombine")
    @classmethod
    def _check_recombine(cls, value: int) -> int:
        if value == 1:
            raise ValueError("a recombination sees 2 to 4 proofs (0 turns it off), not 1")
        return value

    @model_validator(mode="after")
    def _recombine_needs_reviews(self) -> Acceptance:
        if self.recombine and not self.review:
            # its prompt shows each proof with the findings a reviewer confirmed in it
            raise ValueError(
                "acceptance.recombine shows each proof with the findings reviewers confirmed, "
                "so it needs acceptance.review; set recombine to 0 or review to true"
            )
        return self


class Budget(_Section):
    wall_clock_s: float | None = Field(default=None, gt=0)
    total_tokens: int | None = Field(default=None, gt=0)
    calls: int | None = Field(default=None, gt=0)
    # What a solve call in flight holds of the token budget: its role's expected length
    # (1.5 x the longest the run has seen, solver.loop.budget), or its full max_tokens and no
    # more than its lineage's share of what is left (the rule before issue 45).
    reserve: Literal["expected", "max_tokens"] = "expected"


class Timeouts(_Section):
    connect_s: float = Field(default=10.0, gt=0)
    first_byte_s: float = Field(default=1800.0, gt=0)
    idle_s: float = Field(default=600.0, gt=0)
    total_s: float | None = Field(default=None, gt=0)
    # The check of the endpoint before a run is made (solve, eval): each of its requests
    # may take this long. 0: no check; the run then waits for the endpoint as
    # retry.endpoint_wait_s says (a server still loading its weights).
    preflight_s: float = Field(default=5.0, ge=0)


class Retry(_Section):
    max_attempts: int = Field(default=6, ge=1)
    max_wait_s: float = Field(default=120.0, gt=0)
    endpoint_wait_s: float = Field(
        default=600.0, ge=0, description="how long to wait for an endpoint that is down"
    )


class Grading(_Section):
    evaluation_graders: int = Field(default=1, ge=1, le=15, description="independent graders")
    reconcile_spread: int = Field(default=2, ge=0, le=7, description="spread that reconciles")
    reconcile: Literal["rejudge", "off"] = Field(
        default="rejudge", description="graders re-grade with the others' judgments in view"
    )
    aggregation: Literal["min", "median", "mean"] = Field(
        default="min", description="how graders' grades make the evaluation grade"
    )
    scale: Literal["points", "proofbench"] = Field(
        default="points", description="0-7 points, or IMO-ProofBench's 7/6/1/0"
    )
    draft_scheme: bool = Field(
        default=True, description="draft a marking scheme when a problem has no guidelines"
    )
    given_verifications: int = Field(
        default=0,
        ge=0,
        le=64,
        description="verifications of a given proof by each verifier variant, beside its "
        "grading (solver eval calibrate --verifications)",
    )
    given_comparisons: bool = Field(
        default=False,
        description="compare each given proof pairwise, both ways, with the later proofs of "
        "its problem that humans graded differently (solver eval calibrate --comparisons)",
    )


class Sandbox(_Section):
    """The code sandbox (bubblewrap) and the limits of each execution in it (solver.sandbox;
    `solver tool run`, and the roles' python tool)."""

    bwrap: str = Field(default="bwrap", description="the bubblewrap executable")
    python: str = Field(
        default="/usr/bin/python3",
        pattern=r"^/usr/",
        description="the interpreter inside (only /usr is bound in; it needs sympy)",
    )
    uid: int = Field(
        default=65534, ge=1, le=2**31 - 2, description="the user the sandbox runs as under root"
    )
    cpu_s: int = Field(default=10, ge=1, le=3600, description="CPU seconds of each process")
    wall_s: float = Field(default=20.0, gt=0, le=3600, description="wall time of an execution")
    memory_mb: int = Field(default=1024, ge=64, le=65536, description="address space, MiB")
    file_mb: int = Field(default=16, ge=1, le=4096, description="largest file written, MiB")
    tmp_mb: int = Field(default=64, ge=1, le=4096, description="the private /tmp, MiB")
    processes: int = Field(default=32, ge=1, le=4096, description="processes inside")
    output_bytes: int = Field(
        default=65536, ge=1024, le=16 * 1024 * 1024, description="kept of stdout and of stderr"
    )


class Settings(_Section):
    endpoint: str | None = None
    api: ApiName = "chat"
    model: str | None = None
    api_key: SecretStr | None = None
    # The model's context in tokens, for a server that does not say it in /v1/models (or
    # llama.cpp's /props): a statement that leaves no room for an answer is refused.
    context_length: int | None = Field(default=None, ge=1)
    roles: dict[str, RoleSettings] = Field(default_factory=_default_roles)
    candidates: int = Field(default=4, ge=1, le=256)
    concurrency: int = Field(default=20, ge=1, le=1024)  # candidates x K: one full round
    acceptance: Acceptance = Field(default_factory=Acceptance)
    budget: Budget = Field(default_factory=Budget)
    grading: Grading = Field(default_factory=Grading)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    retry: Retry = Field(default_factory=Retry)
    sandbox: Sandbox = Field(default_factory=Sandbox)
    runs_dir: Path = Path("runs")
    signing_key: Path | None = None
    seed: int = 0

    @field_validator("endpoint")
    @classmethod
    def _check_endpoint(cls, url: str | None) -> str | None:
        if url is None:
            return None
        problem = url_problem(url)
        if problem is not None:
            raise ValueError(f"{mask_url(url)}: {problem}")
        return url

    def role(self, name: str) -> RoleSettings:
        return self.roles.get(name, RoleSettings())

    def masked(self) -> dict[str, Any]:
        """The settings as JSON-able data with secrets masked (for manifests and display)."""
        data = self.model_dump(mode="json")
        if self.api_key is not None:
            data["api_key"] = "***"
        if self.endpoint is not None:
            data["endpoint"] = mask_url(self.endpoint)
        for role in data.get("roles", {}).values():
            if role.get("endpoint"):
                role["endpoint"] = mask_url(role["endpoint"])
        return data


def default_of(dotted: str) -> Any:
    """The built-in default of a key (``concurrency``, ``acceptance.verifications``): what
    a flag's help names, so it and `solver config show` cannot disagree."""
    model: type[BaseModel] = Settings
    *sections, leaf = dotted.split(".")
    for name in sections:
        factory = model.model_fields[name].default_factory
        assert factory is not None, dotted
        model = type(factory())  # type: ignore[call-arg]
    return model.model_fields[leaf].get_default(call_default_factory=True)


@dataclass(frozen=True)
class ResolvedSettings:
    settings: Settings
    sources: dict[str, str]  # dotted key -> "default" | file path | "env:NAME" | "flag"
    config_file: Path | None


# ---------------------------------------------------------------- layering


def _sections() -> set[str]:
    """Dotted names of the tables a config file may hold (possibly empty)."""
    tables = {"roles", "budget", "timeouts", "retry", "acceptance", "grading", "sandbox"}
    tables.update(f"roles.{name}" for name in ROLE_NAMES)
    return tables


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(_flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def _set_dotted(target: dict[str, Any], dotted: str, value: Any) -> None:
    node = target
    *parents, leaf = dotted.split(".")
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[leaf] = value


def _known_keys() -> set[str]:
    keys = set(_flatten(Settings().model_dump()))
    keys.update({"endpoint", "model", "api_key", "signing_key"})
    for name in ROLE_NAMES:
        for field in RoleSettings.model_fields:
            keys.add(f"roles.{name}.{field}")
    sections = (
        ("budget", Budget),
        ("timeouts", Timeouts),
        ("retry", Retry),
        ("acceptance", Acceptance),
        ("grading", Grading),
        ("sandbox", Sandbox),
    )
    for section, model in sections:
        for field in model.model_fields:
            keys.add(f"{section}.{field}")
    return keys


def read_config_file(path: Path) -> dict[str, Any]:
    """Parse a TOML config file into flat dotted keys, refusing unknown keys by name."""
    raw = _read_config_bytes(path)
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {one_line(str(exc), 200)}") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid TOML: nested too deeply") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise ConfigError(f"{path}: invalid TOML: {one_line(str(exc), 200)}") from None
    flat = _flatten(data)
    known = _known_keys()
    sections = _sections()
    for key, value in list(flat.items()):
        if key in sections and value == {}:
            del flat[key]  # an empty table such as `[budget]` sets nothing
        elif key not in known:
            raise ConfigError(f"{path}: unknown key '{key}'")
    return flat


def _read_config_bytes(path: Path) -> bytes:
    """A config file's bytes: a regular file (a FIFO would hang), at most
    MAX_CONFIG_BYTES, read with the file type checked on the open descriptor."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file") from None
    except OSError as exc:  # a symlink loop, no permission, a name too long
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ConfigError(f"{path}: is a directory, not a config file")
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{path}: not a regular file")
        if info.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: config file is over {MAX_CONFIG_BYTES} bytes")
        with os.fdopen(os.dup(fd), "rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: config file is over {MAX_CONFIG_BYTES} bytes")
    return raw


def _env_layer(env: Mapping[str, str], api_hint: str | None) -> dict[str, tuple[Any, str]]:
    layer: dict[str, tuple[Any, str]] = {}
    direct = {
        "SOLVER_ENDPOINT": "endpoint",
        "SOLVER_MODEL": "model",
        "SOLVER_API": "api",
        "SOLVER_API_KEY": "api_key",
    }
    for name, key in direct.items():
        if env.get(name):
            layer[key] = (env[name], f"env:{name}")
    api = layer["api"][0] if "api" in layer else api_hint
    # The providers' own variables apply only to their protocol and never override ours.
    vendor = "ANTHROPIC" if api == "anthropic" else "OPENAI"
    if "endpoint" not in layer and env.get(f"{vendor}_BASE_URL"):
        layer["endpoint"] = (env[f"{vendor}_BASE_URL"], f"env:{vendor}_BASE_URL")
    if "api_key" not in layer and env.get(f"{vendor}_API_KEY"):
        layer["api_key"] = (env[f"{vendor}_API_KEY"], f"env:{vendor}_API_KEY")
    return layer


def resolve_settings(
    *,
    config_file: Path | None = None,
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ResolvedSettings:
    """Resolve defaults < file < environment < flags. ``flags`` uses dotted keys; None values
    mean "not given" and are skipped."""
    env = os.environ if env is None else env
    # Every role starts from its defaults, so a file or flag that sets one role's values
    # changes that role and leaves the other five in place.
    merged: dict[str, Any] = {"roles": {name: {} for name in ROLE_NAMES}}
    sources: dict[str, str] = dict.fromkeys(_flatten(Settings().model_dump()), "default")

    file_path = config_file
    if file_path is None:
        candidate = (cwd or Path.cwd()) / DEFAULT_CONFIG_FILE
        file_path = candidate if candidate.is_file() else None
    if file_path is not None:
        for key, value in read_config_file(file_path).items():
            _set_dotted(merged, key, value)
            sources[key] = str(file_path)

    flag_values = {k: v for k, v in (flags or {}).items() if v is not None}
    api_hint = flag_values.get("api") or merged.get("api")
    for key, (value, source) in _env_layer(env, api_hint).items():
        _set_dotted(merged, key, value)
        sources[key] = source
    for key, value in flag_values.items():
        _set_dotted(merged, key, value)
        sources[key] = "flag"

    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        origin = sources.get(key, "configuration")
        message = one_line(str(first["msg"]), 300)
        raise ConfigError(f"{origin}: key '{key}': {message}") from None
    return ResolvedSettings(settings=settings, sources=sources, config_file=file_path)


def describe(resolved: ResolvedSettings) -> list[tuple[str, Any, str]]:
    """(key, value, source) rows for display; secrets masked."""
    flat = _flatten(resolved.settings.masked())
    rows = []
    for key in sorted(flat):
        rows.append((key, flat[key], resolved.sources.get(key, "default")))
    return rows
