"""The real agent CLIs the agent tests drive: pinned npm releases, installed once into a cache.

``python -m tests.agents.clis install`` (run by ``make test``) puts Node in place from Debian
when it is missing, then each pinned package into its own folder under
``~/.cache/olympiad-solver/npm/<package>-<version>``, so a new pin never mixes with an old
install. When the registry cannot be reached it says so and exits 0: the tests then skip with
that reason, or fail when ``CI=true``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Cli:
    package: str
    version: str
    command: str

    @property
    def folder(self) -> Path:
        return cache_root() / f"{self.package.strip('@').replace('/', '-')}-{self.version}"

    @property
    def binary(self) -> Path:
        return self.folder / "node_modules" / ".bin" / self.command

    def installed(self) -> bool:
        return self.binary.exists() and os.access(self.binary, os.X_OK)


# pinned: a new release is tried by changing these, never picked up silently
CLAUDE_CODE = Cli("@anthropic-ai/claude-code", "2.1.332", "claude")
CODEX = Cli("@openai/codex", "0.171.0", "codex")
PINNED = (CLAUDE_CODE, CODEX)
_NPM_TIMEOUT = 600  # each package ships a native binary of a few hundred MB


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "olympiad-solver" / "npm"


def _ensure_node() -> str:
    """Empty when node and npm are there (or were just installed); else why not."""
    if shutil.which("node") and shutil.which("npm"):
        return ""
    if not shutil.which("apt-get") or os.geteuid() != 0:
        return "node and npm are missing and cannot be installed here (needs apt-get as root)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "nodejs", "npm"],
    ):
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return f"{' '.join(command)} failed: {done.stderr.strip()[-300:]}"
    return ""


def _install(cli: Cli) -> str:
    """Empty on success; else the reason, one line."""
    staging = cli.folder.with_name(cli.folder.name + f".partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    command = [
        "npm", "install", "--prefix", str(staging), "--no-audit", "--no-fund",
        "--no-update-notifier", "--loglevel=error", f"{cli.package}@{cli.version}",
    ]  # fmt: skip
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=_NPM_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        shutil.rmtree(staging, ignore_errors=True)
        return f"npm install {cli.package}@{cli.version} took over {_NPM_TIMEOUT} s"
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"npm install {cli.package}@{cli.version} failed: {tail}"
    shutil.rmtree(cli.folder, ignore_errors=True)
    staging.rename(cli.folder)  # whole or not at all: a half install is never found
    return ""


def missing_reason(cli: Cli) -> str:
    """Why ``cli`` cannot be run, for a skip or a CI failure; empty when it can."""
    if cli.installed():
        return ""
    note = cache_root() / f"{cli.folder.name}.failed"
    why = note.read_text().strip() if note.exists() else "not installed"
    how = "run `make test` or `python -m tests.agents.clis install`"
    return f"{cli.package}@{cli.version}: {why} ({how})"


def install() -> int:
    cache_root().mkdir(parents=True, exist_ok=True)
    node_problem = _ensure_node()
    wanted = [cli for cli in PINNED if not cli.installed()]
    # both downloads at once: each is mostly waiting on the registry, and npm's cache is safe
    # to share between concurrent installs
    with ThreadPoolExecutor(max_workers=max(1, len(wanted))) as pool:
        found = pool.map(lambda cli: node_problem or _install(cli), wanted)
        problems = dict(zip(wanted, found, strict=True))
    for cli in PINNED:
        note = cache_root() / f"{cli.folder.name}.failed"
        if cli not in problems:
            note.unlink(missing_ok=True)
            continue
        problem = problems[cli]
        if problem:
            note.write_text(problem + "\n")
            print(f"agent CLI not installed, its tests will skip (fail under CI): {problem}")
        else:
            note.unlink(missing_ok=True)
            print(f"installed {cli.package}@{cli.version}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        sys.exit("usage: python -m tests.agents.clis install")
    sys.exit(install())
