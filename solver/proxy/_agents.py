"""Point Claude Code and Codex at the proxy: edit their settings files safely.

Every write keeps a backup of the original (made once, so running twice never loses it),
replaces the file atomically (temp file, fsync, rename, directory fsync) and keeps its mode.
``restore`` puts the original back (or removes the file if there was none before).

- Claude Code: ``~/.claude/settings.json`` ``env``: ``ANTHROPIC_BASE_URL``, a
  ``CLAUDE_STREAM_IDLE_TIMEOUT_MS`` above the proxy's upstream budget, and
  ``CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK=1`` so a failed stream is not replayed as a
  non-streamed duplicate turn (research E41).
- Codex: ``~/.codex/config.toml``: a ``[model_providers.olympiad-proxy]`` table with
  ``wire_api = "responses"``, idle timeout and retries, selected by ``model_provider``. Only
  those lines change; comments and everything else stay as they were.
"""

from __future__ import annotations

import difflib
import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ._config import ProxyConfigError

PROVIDER_ID = "olympiad-proxy"
BACKUP_SUFFIX = ".olympiad-proxy.bak"
ABSENT_SUFFIX = ".olympiad-proxy.absent"


@dataclass(frozen=True, slots=True)
class Change:
    path: Path
    before: str
    after: str

    def diff(self) -> str:
        lines = difflib.unified_diff(
            self.before.splitlines(keepends=True),
            self.after.splitlines(keepends=True),
            fromfile=f"{self.path} (now)",
            tofile=f"{self.path} (proposed)",
        )
        return "".join(lines)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ProxyConfigError(f"{path}: cannot read: {exc}") from None


def atomic_write(path: Path, text: str, mode: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if mode is None else mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ProxyConfigError(f"{path}: cannot write: {exc}") from None


def apply(change: Change) -> Path | None:
    """Write ``change`` after saving the original once; returns the backup path."""
    path = change.path
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    absent = path.with_name(path.name + ABSENT_SUFFIX)
    mode = None
    if path.exists():
        mode = path.stat().st_mode & 0o7777
        if not backup.exists() and not absent.exists():
            atomic_write(backup, change.before, mode)
    elif not backup.exists() and not absent.exists():
        atomic_write(absent, "")
    atomic_write(path, change.after, mode)
    return backup if backup.exists() else None


def restore(path: Path) -> str:
    """Undo :func:`apply`. Returns what was done, for the user."""
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    absent = path.with_name(path.name + ABSENT_SUFFIX)
    if backup.exists():
        mode = backup.stat().st_mode & 0o7777
        atomic_write(path, _read(backup), mode)
        backup.unlink()
        return f"restored {path} from {backup.name}"
    if absent.exists():
        path.unlink(missing_ok=True)
        absent.unlink()
        return f"removed {path} (it did not exist before)"
    raise ProxyConfigError(f"{path}: no backup to restore")


# ---------------------------------------------------------------- Claude Code


def claude_change(path: Path, proxy_url: str, idle_timeout_ms: int) -> Change:
    before = _read(path)
    settings: dict[str, object] = {}
    if before.strip():
        try:
            loaded = json.loads(before)
        except ValueError as exc:
            raise ProxyConfigError(f"{path}: not valid JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise ProxyConfigError(f"{path}: settings must be a JSON object")
        settings = loaded
    env = settings.get("env", {})
    if not isinstance(env, dict):
        raise ProxyConfigError(f"{path}: 'env' must be an object")
    env = {
        **env,
        "ANTHROPIC_BASE_URL": proxy_url.rstrip("/"),
        "CLAUDE_STREAM_IDLE_TIMEOUT_MS": str(idle_timeout_ms),
        "CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK": "1",
    }
    settings["env"] = env
    return Change(path, before, json.dumps(settings, indent=2, ensure_ascii=False) + "\n")


# ---------------------------------------------------------------- Codex


def _is_header(line: str) -> bool:
    return line.lstrip().startswith("[")


def _is_ours(line: str) -> bool:
    """Our provider's table header, however spaced or quoted (``[ model_providers."x" ]``)."""
    bare = "".join(line.split("#", 1)[0].split()).replace('"', "").replace("'", "")
    return bare == f"[model_providers.{PROVIDER_ID}]"


def _declares_ours(text: str) -> bool:
    providers = tomllib.loads(text).get("model_providers")
    return isinstance(providers, dict) and PROVIDER_ID in providers


def _toml_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def codex_change(
    path: Path, proxy_url: str, idle_timeout_ms: int, model: str = "", token_env: str = ""
) -> Change:
    """``token_env`` names the variable holding the proxy token (Codex sends it as a bearer
    token); the token itself never goes into the file."""
    before = _read(path)
    try:
        tomllib.loads(before)
    except tomllib.TOMLDecodeError as exc:
        raise ProxyConfigError(f"{path}: not valid TOML: {exc}") from None
    lines = before.splitlines()
    header = f"[model_providers.{PROVIDER_ID}]"
    where = f"{path}: model_providers.{PROVIDER_ID}"
    top_keys = {"model_provider"} | ({"model"} if model else set())
    out: list[str] = []
    in_top = True
    skipping = False
    for line in lines:
        if _is_header(line):
            in_top = False
            skipping = _is_ours(line)
            if skipping:
                continue
        if skipping:
            continue
        key = line.split("=", 1)[0].strip()
        if in_top and "=" in line and key in top_keys:
            continue
        out.append(line)
    first_table = next((i for i, line in enumerate(out) if _is_header(line)), len(out))
    top = [f"model_provider = {_toml_str(PROVIDER_ID)}"]
    if model:
        top.append(f"model = {_toml_str(model)}")
    out[first_table:first_table] = [*top, ""] if first_table < len(out) else top
    while out and not out[-1].strip():
        out.pop()
    try:
        declared_elsewhere = _declares_ours("\n".join(out))
    except tomllib.TOMLDecodeError:
        declared_elsewhere = True  # only its table was taken out, so it was defined elsewhere
    if declared_elsewhere:
        raise ProxyConfigError(
            f"{where} is declared as an inline table or with dotted keys, which this command "
            "does not rewrite: remove it (or make it a [model_providers.olympiad-proxy] table) "
            "and run again"
        )
    base_url = proxy_url.rstrip("/")
    if not base_url.endswith("/v1"):
        base_url += "/v1"
    out += [
        "",
        header,
        'name = "olympiad-solver proxy"',
        f"base_url = {_toml_str(base_url)}",
        'wire_api = "responses"',
        f"stream_idle_timeout_ms = {idle_timeout_ms}",
        "stream_max_retries = 5",
        "request_max_retries = 4",
    ]
    if token_env:
        out.append(f"env_key = {_toml_str(token_env)}")
    after = "\n".join(out) + "\n"
    try:
        parsed = tomllib.loads(after)
    except tomllib.TOMLDecodeError as exc:  # a layout the line edit above did not foresee
        raise ProxyConfigError(
            f"{where}: cannot add it to this file ({exc}); edit by hand"
        ) from None
    assert parsed["model_providers"][PROVIDER_ID]["wire_api"] == "responses"
    return Change(path, before, after)
