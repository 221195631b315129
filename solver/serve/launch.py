"""``solver serve up``: a validated recipe process under the supervisor, with its endpoint
descriptor, event log and identity records in the state directory."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from solver.endpoint_file import (
    EndpointDescriptor,
    clear_descriptor,
    state_dir,
    write_descriptor,
)
from solver.errors import ConfigError, InputError
from solver.serve.recipe import Deployment, ProcessCommand, container_name
from solver.serve.supervisor import (
    SGLANG_HEALTH_CHECK_TIMEOUT,
    SGLANG_WATCHDOG_TIMEOUT,
    Event,
    Kind,
    Policy,
    ReadyInfo,
    Supervisor,
)
from solver.serve.validate import errors_of, validate_deployment

REDACTED = "***"


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    name: str  # used for log file names and the descriptor's source
    argv: tuple[str, ...]
    env: dict[str, str]
    url: str
    writes_descriptor: bool
    secret: str | None = None
    # commands run before each start and at each stop: in container mode signalling the
    # `docker run` client leaves the container running, so it is stopped and removed by name
    prepare: tuple[tuple[str, ...], ...] = ()
    teardown: tuple[tuple[str, ...], ...] = ()
    kind: Kind = "server"
    # what the server itself waits before failing a health probe, and how long a forward
    # batch may run before it crashes: the supervisor's deep-probe timeout and hang window
    health_check_timeout: float = SGLANG_HEALTH_CHECK_TIMEOUT
    watchdog_timeout: float = SGLANG_WATCHDOG_TIMEOUT

    def policy(self, base: Policy | None) -> Policy:
        return replace(
            base or Policy(),
            health_check_timeout=self.health_check_timeout,
            hang_after=self.watchdog_timeout,
        )

    def printable_argv(self) -> list[str]:
        """The argv with the API key replaced, for logs and terminals."""
        return [REDACTED if self.secret and a == self.secret else a for a in self.argv]


def pick_process(deployment: Deployment, label: str | None) -> ProcessCommand:
    labels = [p.label for p in deployment.processes]
    if label is None:
        if len(labels) > 1:
            raise InputError(
                f"recipe {deployment.recipe.name} has {len(labels)} processes "
                f"({', '.join(labels)}): choose one with --process"
            )
        return deployment.processes[0]
    for process in deployment.processes:
        if label in (process.label, process.role):
            return process
    raise InputError(
        f"recipe {deployment.recipe.name} has no process {label!r} ({', '.join(labels)})"
    )


def installed_version(python: str, distribution: str) -> str | None:
    """The version of ``distribution`` installed for the interpreter ``python``, or None.

    Reads package metadata only (no import of sglang, which takes seconds and needs torch)."""
    code = (
        "import sys\nfrom importlib.metadata import PackageNotFoundError, version\n"
        "try:\n    print(version(sys.argv[1]))\nexcept PackageNotFoundError:\n    pass\n"
    )
    try:
        done = subprocess.run(
            [python, "-c", code, distribution], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def pip_requirements(deployment: Deployment) -> list[str]:
    """The pip requirements that install exactly the versions the recipe was validated for."""
    recipe = deployment.recipe
    out = [f"sglang[all]=={recipe.sglang_version}"]
    if recipe.router_version and any(p.role == "router" for p in deployment.processes):
        out.append(f"{recipe.router}=={recipe.router_version}")
    return out


def check_installed(deployment: Deployment, process: ProcessCommand) -> None:
    """The interpreter the argv names must carry the version the recipe pins: a flag table of
    one release says nothing about another (flags drift between minor releases)."""
    recipe = deployment.recipe
    distribution: str
    if process.role == "router":
        distribution, pinned = recipe.router, recipe.router_version
    else:
        distribution, pinned = "sglang", recipe.sglang_version
    python = process.argv[0]
    found = installed_version(python, distribution)
    if found is None:
        raise InputError(
            f"{distribution} is not installed for {python}; install {distribution}=={pinned} "
            f"or run the pinned image with --container"
        )
    if pinned is not None and found != pinned:
        raise InputError(
            f"{python} has {distribution} {found} but recipe {recipe.name} is validated for "
            f"{pinned}; install {distribution}=={pinned}, use --container, or pass "
            "--allow-version-mismatch"
        )


def plan_recipe(
    deployment: Deployment,
    process: ProcessCommand,
    *,
    container: bool = False,
    api_key_env: str | None = None,
    check_version: bool = True,
) -> LaunchPlan:
    """Validate the deployment and build the command for one of its processes."""
    errors = errors_of(validate_deployment(deployment))
    if errors:
        lines = "; ".join(e.line() for e in errors)
        raise ConfigError(f"recipe {deployment.recipe.name} fails validation: {lines}")
    if check_version and not container:
        check_installed(deployment, process)
    argv = list(process.container_argv if container else process.argv)
    secret = None
    if api_key_env:
        secret = os.environ.get(api_key_env)
        if not secret:
            raise InputError(f"--api-key-env {api_key_env}: that environment variable is empty")
        argv += ["--api-key", secret]
    prepare: tuple[tuple[str, ...], ...] = ()
    teardown: tuple[tuple[str, ...], ...] = ()
    if container:
        prepare, teardown = container_cleanup(container_name(deployment.recipe.name, process.label))
    return LaunchPlan(
        name=f"{deployment.recipe.name}-{process.label}",
        argv=tuple(argv),
        env={} if container else dict(process.env),
        url=process.url,
        writes_descriptor=process is deployment.entry,
        secret=secret,
        prepare=prepare,
        teardown=teardown,
        kind="router" if process.role == "router" else "server",
        health_check_timeout=_seconds(
            process.env.get("SGLANG_HEALTH_CHECK_TIMEOUT"), SGLANG_HEALTH_CHECK_TIMEOUT
        ),
        watchdog_timeout=_seconds(
            _flag_value(process.argv, "--watchdog-timeout"), SGLANG_WATCHDOG_TIMEOUT
        ),
    )


def _flag_value(argv: Sequence[str], option: str) -> str | None:
    for index, arg in enumerate(argv):
        if arg == option and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith(option + "="):
            return arg.split("=", 1)[1]
    return None


def _seconds(text: str | None, default: float) -> float:
    try:
        value = float(text) if text is not None else default
    except ValueError:
        return default
    return value if value > 0 else default


def container_cleanup(
    name: str, grace: float = 30.0
) -> tuple[tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...]]:
    """(before each start, at each stop): a leftover container of that name blocks the next
    `docker run --name`, and only the docker daemon can stop a container."""
    remove = ("docker", "rm", "--force", name)
    stop = ("docker", "stop", f"--time={int(grace)}", name)
    return (remove,), (stop, remove)


def run_plan(
    plan: LaunchPlan,
    *,
    source: str,
    policy: Policy | None = None,
    echo: Callable[[str], None] = print,
    install_stop: Callable[[Supervisor], None] | None = None,
) -> Supervisor:
    """Supervise ``plan`` until stopped; returns the finished supervisor (for its events)."""
    folder = state_dir() / "serve"
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder / f"{plan.name}.events.jsonl"
    secret = plan.secret

    def on_event(event: Event) -> None:
        line = json.dumps(event.as_json(), sort_keys=True, default=str)
        if secret:
            line = line.replace(secret, REDACTED)
        with log_path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
        pid = event.detail.get("pid")
        # a dead or hung server must not stay advertised until the restart is ready
        down = event.kind in ("exited", "unresponsive", "wedged") and isinstance(pid, int)
        removed = plan.writes_descriptor and down and clear_descriptor(pid)
        echo(f"serve: {event.kind} {json.dumps(event.detail, default=str)}")
        if removed:
            echo("serve: endpoint descriptor removed until the server is ready again")

    def on_ready(info: ReadyInfo) -> None:
        _write_identity(folder / f"{plan.name}.identity.json", info, secret)
        if plan.writes_descriptor:
            path = write_descriptor(
                EndpointDescriptor(
                    base_url=f"{info.base_url}/v1",
                    model=info.model or "unknown",
                    source=source,
                    pid=info.pid,
                    context_length=info.context_length,
                )
            )
            echo(f"serve: endpoint descriptor {path}")

    supervisor = Supervisor(
        plan.argv,
        plan.url,
        env=plan.env,
        api_key=secret,
        policy=plan.policy(policy),
        output=folder / f"{plan.name}.out",
        on_event=on_event,
        on_ready=on_ready,
        prepare=plan.prepare,
        teardown=plan.teardown,
        kind=plan.kind,
    )
    echo(f"serve: starting {' '.join(plan.printable_argv())}")
    echo(f"serve: events in {log_path}")
    if install_stop is not None:
        install_stop(supervisor)
    try:
        supervisor.run()
    finally:
        for event in supervisor.events:
            pid = event.detail.get("pid")
            if event.kind == "ready" and isinstance(pid, int):
                clear_descriptor(pid)
    return supervisor


def _write_identity(path: Path, info: ReadyInfo, secret: str | None) -> None:
    """/server_info (version, launch command, resolved args) and /model_info (parsers)."""
    record = {
        "pid": info.pid,
        "base_url": info.base_url,
        "model": info.model,
        "context_length": info.context_length,
        "server_info": info.server_info,
        "model_info": info.model_info,
    }
    text = json.dumps(record, indent=2, sort_keys=True, default=str)
    if secret:
        text = text.replace(secret, REDACTED)
    path.write_text(text + "\n", encoding="utf-8")


def plan_command(
    argv: Sequence[str], url: str, name: str = "custom", kind: Kind = "server"
) -> LaunchPlan:
    """A plan for any command (a vLLM server, a custom build, a router): supervised like a
    recipe; the server's health-check timeout and watchdog come from its argv and environment
    when it names them."""
    if not argv:
        raise InputError("nothing to supervise: give the command after --")
    return LaunchPlan(
        name=name,
        argv=tuple(argv),
        env={},
        url=url,
        writes_descriptor=True,
        kind=kind,
        health_check_timeout=_seconds(
            os.environ.get("SGLANG_HEALTH_CHECK_TIMEOUT"), SGLANG_HEALTH_CHECK_TIMEOUT
        ),
        watchdog_timeout=_seconds(_flag_value(argv, "--watchdog-timeout"), SGLANG_WATCHDOG_TIMEOUT),
    )
