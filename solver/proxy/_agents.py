"""Point Claude Code and Codex at the proxy: edit their settings files safely.

Every write keeps a backup of the original bytes (made once, so running twice never loses
it), replaces the file atomically (temp file, fsync, rename, directory fsync) and keeps its
mode. A settings file that is a symlink (dotfile managers) is written through the link: the
link stays, its target is replaced. The bytes written are kept beside the backup, so
``restore`` can tell whether the file was edited since, and refuses then unless forced.
``restore`` puts the original back (or removes the file if there was none before).

- Claude Code: ``~/.claude/settings.json`` ``env``: ``ANTHROPIC_BASE_URL``, a placeholder
  ``ANTHROPIC_AUTH_TOKEN`` (without any credential Claude Code stops at "Not logged in"; the
  proxy holds the upstream keys) or, for a proxy with a token, an ``apiKeyHelper`` that prints
  the variable holding it, a ``CLAUDE_STREAM_IDLE_TIMEOUT_MS`` above the proxy's upstream
  budget, and ``CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK=1`` so a failed stream is not
  replayed as a non-streamed duplicate turn.
- Codex: ``~/.codex/config.toml``: a ``[model_providers.olympiad-proxy]`` table with
  ``wire_api = "responses"``, idle timeout and retries, selected by ``model_provider``; a
  custom provider needs no ChatGPT login. Only those lines change; comments, line endings and
  everything else stay as they were.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path

from solver._util.fs import write_atomic
from solver.errors import ProxyConfigError

PROVIDER_ID = "olympiad-proxy"
BACKUP_SUFFIX = ".olympiad-proxy.bak"
ABSENT_SUFFIX = ".olympiad-proxy.absent"
WRITTEN_SUFFIX = ".olympiad-proxy.written"
PLACEHOLDER_TOKEN = "olympiad-proxy-no-key"
MAX_SETTINGS_BYTES = 4 * 1024 * 1024


def _diff(before: str, after: str, old: str, new: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), old, new
    )
    return "".join(lines)


@dataclass(frozen=True, slots=True)
class Change:
    path: Path
    before: str
    after: str

    def diff(self) -> str:
        return _diff(self.before, self.after, f"{self.path} (now)", f"{self.path} (proposed)")


def _target(path: Path) -> Path:
    """Where the bytes live: a symlink is followed (and must end at a regular file or
    nothing)."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _read_bytes(path: Path) -> bytes | None:
    """The file's bytes, or None when it does not exist; regular files only, bounded."""
    target = _target(path)
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ProxyConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ProxyConfigError(f"{path}: not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(MAX_SETTINGS_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_SETTINGS_BYTES:
        raise ProxyConfigError(f"{path}: larger than {MAX_SETTINGS_BYTES} bytes")
    return data


def _decode(path: Path, data: bytes | None) -> str:
    if data is None:
        return ""
    try:
        return data.decode("utf-8")  # newlines as they are: CRLF stays CRLF
    except UnicodeDecodeError as exc:
        raise ProxyConfigError(f"{path}: not UTF-8: {exc}") from None


def _read(path: Path) -> str:
    return _decode(path, _read_bytes(path))


def _line_end(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """The project's one atomic write, through a symlink to its target, keeping ``mode``."""
    path = _target(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data, mode=0o600 if mode is None else mode)
        if mode is not None and path.stat().st_mode & 0o7777 != mode:
            os.chmod(path, mode)  # the umask narrowed it
    except OSError as exc:
        raise ProxyConfigError(f"{path}: cannot write: {exc.strerror or exc}") from None


def _siblings(path: Path) -> tuple[Path, Path, Path]:
    """Backup, absent marker and written copy: beside the path the user named."""
    name = path.name
    return (
        path.with_name(name + BACKUP_SUFFIX),
        path.with_name(name + ABSENT_SUFFIX),
        path.with_name(name + WRITTEN_SUFFIX),
    )


def _mode(path: Path) -> int | None:
    try:
        return _target(path).stat().st_mode & 0o7777
    except FileNotFoundError:
        return None


def apply(change: Change) -> Path | None:
    """Write ``change`` after saving the original bytes once; returns the backup path."""
    path = change.path
    backup, absent, written = _siblings(path)
    original = _read_bytes(path)
    mode = _mode(path)
    if not backup.exists() and not absent.exists():
        if original is None:
            atomic_write(absent, b"")
        else:
            atomic_write(backup, original, mode)
    data = change.after.encode("utf-8")
    atomic_write(path, data, mode)
    atomic_write(written, data, 0o600)
    return backup if backup.exists() else None


@dataclass(frozen=True, slots=True)
class Restore:
    """What ``restore`` does to ``path``: ``diff`` from now to the original, and the edits made
    since ``config`` wrote it (``edited``, a diff; empty when none)."""

    path: Path
    diff: str
    edited: str
    removes: bool

    def describe(self) -> str:
        if self.removes:
            return f"would remove {self.path} (it did not exist before)"
        return self.diff or f"{self.path}: already the original"


def plan_restore(path: Path) -> Restore:
    backup, absent, written = _siblings(path)
    now = _read_bytes(path)
    now_text = _decode(path, now)
    edited = ""
    if written.exists():
        ours = _read_bytes(written)
        if ours != now:
            edited = _diff(
                _decode(written, ours), now_text, f"{path} (as config wrote it)", f"{path} (now)"
            )
    if backup.exists():
        original = _decode(backup, _read_bytes(backup))
        diff = _diff(now_text, original, f"{path} (now)", f"{path} (original)")
        return Restore(path, diff, edited, removes=False)
    if absent.exists():
        return Restore(path, "", edited, removes=True)
    raise ProxyConfigError(f"{path}: no backup to restore")


def restore(path: Path, *, force: bool = False) -> str:
    """Undo :func:`apply`. Refuses (``ProxyConfigError`` with the diff) when the file was edited
    after ``config`` wrote it, unless ``force``. Returns what was done, for the user."""
    plan = plan_restore(path)
    if plan.edited and not force:
        raise ProxyConfigError(
            f"{path} was edited after `solver config` wrote it; restoring would lose these "
            f"edits (run again with --force to restore anyway):\n{plan.edited.rstrip()}"
        )
    backup, absent, written = _siblings(path)
    if plan.removes:
        _target(path).unlink(missing_ok=True)
        absent.unlink()
        written.unlink(missing_ok=True)
        return f"removed {path} (it did not exist before)"
    data = _read_bytes(backup)
    assert data is not None
    atomic_write(path, data, _mode(backup))
    backup.unlink()
    written.unlink(missing_ok=True)
    return f"restored {path} from {backup.name}"


# ---------------------------------------------------------------- Claude Code


def claude_change(path: Path, proxy_url: str, idle_timeout_ms: int, token_env: str = "") -> Change:
    """``token_env`` names the variable holding the proxy's token, for a proxy that needs one:
    an ``apiKeyHelper`` prints it (the token never goes into the file). Without it, a placeholder
    token: Claude Code sends nothing without some credential."""
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
    if token_env:
        if not token_env.isidentifier():
            raise ProxyConfigError(f"--token-env {token_env!r} is not a variable name")
        env.pop("ANTHROPIC_AUTH_TOKEN", None)
        settings["apiKeyHelper"] = f"printenv {shlex.quote(token_env)}"
    elif not settings.get("apiKeyHelper") and not env.get("ANTHROPIC_AUTH_TOKEN"):
        env["ANTHROPIC_AUTH_TOKEN"] = PLACEHOLDER_TOKEN
    settings["env"] = env
    after = json.dumps(settings, indent=2, ensure_ascii=False) + "\n"
    return Change(path, before, after.replace("\n", _line_end(before)))


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
    newline = _line_end(before)
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
    after = newline.join(out) + newline
    try:
        parsed = tomllib.loads(after)
    except tomllib.TOMLDecodeError as exc:  # a layout the line edit above did not foresee
        raise ProxyConfigError(
            f"{where}: cannot add it to this file ({exc}); edit by hand"
        ) from None
    assert parsed["model_providers"][PROVIDER_ID]["wire_api"] == "responses"
    return Change(path, before, after)
