"""pyproject.toml asks for a build backend that understands what it declares."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _minimum(requirement: str, name: str) -> tuple[int, ...] | None:
    found = re.fullmatch(rf"{re.escape(name)}\s*>=\s*([0-9.]+)", requirement.strip())
    return tuple(int(part) for part in found.group(1).split(".")) if found else None


def test_a_license_expression_needs_setuptools_77() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    minimums = [_minimum(r, "setuptools") for r in data["build-system"]["requires"]]
    bound = next(m for m in minimums if m is not None)
    # A plain string `license` is a PEP 639 SPDX expression; older setuptools reject it.
    if isinstance(data["project"].get("license"), str):
        assert bound >= (77,)
