"""SGLang option tables: every command-line option of one SGLang version, as its own parser
declares it.

The tables live in ``serve/options/<tool>-<version>.json`` and are produced by
``serve/generate_option_table.py`` running SGLang's real parser (see that script). This module
only reads them; it never imports sglang.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from solver.errors import ConfigError, NotFound

_TABLE_NAME = re.compile(r"^(?P<tool>[a-z_-]+?)-(?P<version>\d[\w.]*)\.json$")


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One option string as the parser declares it."""

    option: str
    dest: str
    takes_value: bool
    nargs: int | str | None
    value_type: str
    choices: tuple[str, ...] | None
    hidden: bool


@dataclass(frozen=True, slots=True)
class OptionTable:
    tool: str
    version: str
    options: dict[str, OptionSpec]

    def get(self, option: str) -> OptionSpec | None:
        return self.options.get(option)

    def prefix_matches(self, prefix: str) -> list[str]:
        """Options that argparse's abbreviation matching would consider for ``prefix``."""
        return sorted(o for o in self.options if o.startswith(prefix) and o != prefix)


def version_key(version: str) -> tuple[int, ...]:
    """Sortable key for versions such as ``0.5.13.post1`` (post releases sort after)."""
    parts: list[int] = []
    for piece in version.split("."):
        match = re.match(r"^(\d+)", piece)
        if match:
            parts.append(int(match.group(1)))
        post = re.search(r"post(\d+)", piece)
        if post:
            parts.append(int(post.group(1)))
    return tuple(parts)


def _table_files() -> dict[tuple[str, str], str]:
    folder = resources.files("solver.serve").joinpath("options")
    found: dict[tuple[str, str], str] = {}
    for entry in folder.iterdir():
        match = _TABLE_NAME.match(entry.name)
        if match:
            found[(match.group("tool"), match.group("version"))] = entry.name
    return found


def available_versions(tool: str = "sglang") -> list[str]:
    """Versions with a checked-in table, oldest first."""
    versions = [version for (name, version) in _table_files() if name == tool]
    return sorted(versions, key=version_key)


@cache
def load_table(version: str, tool: str = "sglang") -> OptionTable:
    name = _table_files().get((tool, version))
    if name is None:
        have = ", ".join(available_versions(tool)) or "none"
        raise NotFound(
            f"no {tool} option table for version {version} (have: {have}); generate one with "
            "serve/generate_option_table.py"
        )
    raw = resources.files("solver.serve").joinpath("options", name).read_text(encoding="utf-8")
    return _parse(json.loads(raw), name)


def _parse(data: Any, name: str) -> OptionTable:
    try:
        options = {
            option: OptionSpec(
                option=option,
                dest=str(spec["dest"]),
                takes_value=bool(spec["takes_value"]),
                nargs=spec.get("nargs"),
                value_type=str(spec.get("type") or "str"),
                choices=tuple(spec["choices"]) if spec.get("choices") else None,
                hidden=bool(spec.get("hidden", False)),
            )
            for option, spec in data["options"].items()
        }
        return OptionTable(tool=str(data["tool"]), version=str(data["version"]), options=options)
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"serve/options/{name}: malformed option table ({exc})") from None
