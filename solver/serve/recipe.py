"""SGLang deployments as data: one TOML file per recipe in ``serve/recipes/``.

A recipe names the model, the hardware, the pinned SGLang version and container image, and one
or more processes (a plain server; or a prefill worker, a decode worker and a router; or several
replicas behind a router). Every flag and environment variable carries a ``why``.

:func:`render` turns a recipe plus ``--set key=value`` overrides into exact argv, environment
and container commands; it does not validate (see ``serve.validate``).
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from solver.errors import ConfigError, InputError, NotFound

Role = Literal["server", "prefill", "decode", "router"]

SERVER_LAUNCHER = ("python3", "-m", "sglang.launch_server")
RouterTool = Literal["smg", "sglang-router"]
# smg is sglang-router's successor on PyPI: same command line, module renamed
ROUTER_LAUNCHERS: dict[str, tuple[str, ...]] = {
    "smg": ("python3", "-m", "smg.launch_router"),
    "sglang-router": ("python3", "-m", "sglang_router.launch_router"),
}

# Container runtime arguments per vendor: device access, shared memory for NCCL/RCCL, host
# networking so the router and PD bootstrap ports are reachable, and the model cache mounted.
_CONTAINER_ARGS = {
    "amd": (
        "--device=/dev/kfd",
        "--device=/dev/dri",
        "--group-add=video",
        "--cap-add=SYS_PTRACE",
        "--security-opt=seccomp=unconfined",
    ),
    "nvidia": ("--gpus=all",),
}
_CONTAINER_COMMON = ("--ipc=host", "--shm-size=32g", "--network=host")

_VAR = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
# variables every recipe has: `--set model=/local/copy` points all processes at a local checkout
_BUILTIN_VARS = ("model", "served_model_name")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FlagSpec(_Strict):
    name: str = Field(pattern=r"^--[a-z0-9][a-z0-9-]*$")
    value: str | list[str] | None = None
    why: str = Field(min_length=3)


class EnvSpec(_Strict):
    name: str = Field(pattern=r"^[A-Z_][A-Z0-9_]*$")
    value: str
    why: str = Field(min_length=3)


class ProcessSpec(_Strict):
    role: Role = "server"
    name: str = ""
    host: str = "127.0.0.1"
    port: int = 30000
    flags: list[FlagSpec] = Field(default_factory=list, alias="flag")
    env: list[EnvSpec] = Field(default_factory=list)

    @property
    def label(self) -> str:
        return self.name or self.role


class Recipe(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$")
    title: str
    model: str
    served_model_name: str
    hardware: str
    vendor: Literal["amd", "nvidia"]
    gpu_arch: str
    sglang_version: str
    router: RouterTool = "smg"  # which router distribution router_version names
    router_version: str | None = None
    image: str
    image_note: str = ""
    status: str
    notes: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)
    vars: dict[str, str] = Field(default_factory=dict)
    env: list[EnvSpec] = Field(default_factory=list)
    processes: list[ProcessSpec] = Field(alias="process", min_length=1)

    @property
    def entry(self) -> ProcessSpec:
        """The process clients talk to: the router when there is one, else the first server."""
        for process in self.processes:
            if process.role == "router":
                return process
        return self.processes[0]


@dataclass(frozen=True, slots=True)
class ProcessCommand:
    """One process of a rendered recipe."""

    label: str
    role: Role
    argv: tuple[str, ...]
    env: dict[str, str]
    container_argv: tuple[str, ...]
    url: str
    launcher_len: int = len(SERVER_LAUNCHER)  # argv[launcher_len:] is what the parser sees


@dataclass(frozen=True, slots=True)
class Deployment:
    recipe: Recipe
    processes: tuple[ProcessCommand, ...]
    overrides: tuple[str, ...]

    @property
    def entry(self) -> ProcessCommand:
        for process in self.processes:
            if process.role == "router":
                return process
        return self.processes[0]


# ---------------------------------------------------------------- loading


def recipe_names() -> list[str]:
    folder = resources.files("solver.serve").joinpath("recipes")
    return sorted(e.name[: -len(".toml")] for e in folder.iterdir() if e.name.endswith(".toml"))


def load_recipe(name: str) -> Recipe:
    if name not in recipe_names():
        raise NotFound(f"no recipe {name!r}; known: {', '.join(recipe_names())}")
    raw = resources.files("solver.serve").joinpath("recipes", f"{name}.toml").read_text("utf-8")
    return parse_recipe(raw, f"serve/recipes/{name}.toml")


def parse_recipe(text: str, origin: str) -> Recipe:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{origin}: not valid TOML ({exc})") from None
    try:
        return Recipe.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{origin}: {where}: {first['msg']}") from None


def all_recipes() -> list[Recipe]:
    return [load_recipe(name) for name in recipe_names()]


# ---------------------------------------------------------------- rendering


@dataclass
class _Override:
    target: str | None  # process label or role; None = every process
    flag: str
    value: str


def _parse_override(item: str, recipe: Recipe) -> tuple[str, str] | _Override:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise InputError(f"--set {item!r}: expected key=value")
    if key in recipe.vars or key in _BUILTIN_VARS:
        return key, value
    target: str | None = None
    if "." in key:
        target, key = key.split(".", 1)
        labels = {p.label for p in recipe.processes} | {p.role for p in recipe.processes}
        if target not in labels:
            raise InputError(
                f"--set {item!r}: no process {target!r} in recipe {recipe.name} "
                f"(have: {', '.join(sorted(labels))})"
            )
    flag = key if key.startswith("--") else f"--{key}"
    if not re.fullmatch(r"--[a-z0-9][a-z0-9-]*", flag):
        raise InputError(f"--set {item!r}: {key!r} is not a flag name or a recipe variable")
    return _Override(target=target, flag=flag, value=value)


def _apply(flags: list[tuple[str, str | list[str] | None]], override: _Override) -> None:
    """Set, replace or remove (value ``false``) one flag; ``true`` means a valueless switch."""
    names = [name for name, _ in flags]
    if override.value.lower() == "false":
        flags[:] = [(n, v) for n, v in flags if n != override.flag]
        return
    value: str | None = None if override.value.lower() == "true" else override.value
    if override.flag in names:
        flags[names.index(override.flag)] = (override.flag, value)
    else:
        flags.append((override.flag, value))


def _substitute(text: str, variables: dict[str, str], origin: str) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in variables:
            raise ConfigError(f"{origin}: unknown variable {{{name}}}")
        return variables[name]

    return _VAR.sub(replace, text)


def render(recipe: Recipe, overrides: list[str] | tuple[str, ...] = ()) -> Deployment:
    """The exact commands for ``recipe`` with ``--set`` overrides applied."""
    variables = dict(recipe.vars)
    variables.setdefault("model", recipe.model)
    variables.setdefault("served_model_name", recipe.served_model_name)
    flag_overrides: list[_Override] = []
    for item in overrides:
        parsed = _parse_override(item, recipe)
        if isinstance(parsed, _Override):
            flag_overrides.append(parsed)
        else:
            variables[parsed[0]] = parsed[1]
    for process in recipe.processes:
        variables.setdefault(f"{process.label}_port", str(process.port))
        variables.setdefault(f"{process.label}_host", process.host)
    origin = f"recipe {recipe.name}"
    rendered = []
    for process in recipe.processes:
        flags: list[tuple[str, str | list[str] | None]] = [(f.name, f.value) for f in process.flags]
        present = {name for name, _ in flags}
        # Every process binds explicitly: SGLang's own default host is loopback too, but the
        # router's is not, and a recipe should say where it listens.
        if "--port" not in present:
            flags.insert(0, ("--port", str(process.port)))
        if "--host" not in present:
            flags.insert(0, ("--host", process.host))
        for override in flag_overrides:
            if override.target in (None, process.label, process.role):
                _apply(flags, override)
        launcher = ROUTER_LAUNCHERS[recipe.router] if process.role == "router" else SERVER_LAUNCHER
        argv = list(launcher)
        host, port = process.host, str(process.port)
        for name, value in flags:
            argv.append(name)
            if isinstance(value, list):
                argv.extend(_substitute(v, variables, origin) for v in value)
            elif value is not None:
                argv.append(_substitute(value, variables, origin))
            if name == "--host" and isinstance(value, str):
                host = _substitute(value, variables, origin)
            if name == "--port" and isinstance(value, str):
                port = _substitute(value, variables, origin)
        # recipe-wide variables are SGLang's; the router is another program
        shared = [] if process.role == "router" else recipe.env
        env = {e.name: _substitute(e.value, variables, origin) for e in shared}
        env.update({e.name: _substitute(e.value, variables, origin) for e in process.env})
        rendered.append(
            ProcessCommand(
                label=process.label,
                role=process.role,
                argv=tuple(argv),
                env=env,
                container_argv=_container(recipe, env, argv, process.label),
                url=f"http://{host}:{port}",
                launcher_len=len(launcher),
            )
        )
    return Deployment(recipe=recipe, processes=tuple(rendered), overrides=tuple(overrides))


_CONTAINER_HF_HOME = "/models/huggingface"


def container_name(recipe_name: str, label: str) -> str:
    """The fixed name the container runs under, so a supervisor can stop and remove it."""
    return f"sglang-{recipe_name}-{label}"


def _container(recipe: Recipe, env: dict[str, str], argv: list[str], label: str) -> tuple[str, ...]:
    # --init: a real PID 1 in the container forwards signals and reaps SGLang's workers
    name = container_name(recipe.name, label)
    runtime = ["docker", "run", "--rm", "--init", f"--name={name}"]
    runtime += [*_CONTAINER_ARGS[recipe.vendor], *_CONTAINER_COMMON]
    # the host's model cache, resolved now: a docker argv is not expanded by a shell
    cache = os.environ.get("HF_HOME") or str(Path.home() / ".cache" / "huggingface")
    # mounted at a fixed path that HF_HOME names, whatever user the image runs as
    runtime += [f"--volume={cache}:{_CONTAINER_HF_HOME}", f"--env=HF_HOME={_CONTAINER_HF_HOME}"]
    for key, value in env.items():
        runtime.append(f"--env={key}={value}")
    return (*runtime, recipe.image, *argv)
