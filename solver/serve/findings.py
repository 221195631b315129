"""What validation reports: a finding per problem, and the parsed options the rules read.

A leaf module: the option checks (``validate``), the cross-flag rules (``rules``,
``deployment_rules``) and the release floors (``minimums``) all produce findings without
importing one another's modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Finding:
    severity: Severity
    rule: str
    option: str
    message: str
    process: str = ""

    def line(self) -> str:
        where = f"[{self.process}] " if self.process else ""
        return f"{self.severity}: {where}{self.option}: {self.message}"


@dataclass
class ParsedArgs:
    """The options of one command line: canonical option -> value(s) (None for switches)."""

    values: dict[str, str | list[str] | None] = field(default_factory=dict)
    dests: dict[str, str | list[str] | None] = field(default_factory=dict)

    def get(self, dest: str) -> str | list[str] | None:
        return self.dests.get(dest)

    def has(self, dest: str) -> bool:
        return dest in self.dests

    def text(self, dest: str, default: str = "") -> str:
        value = self.dests.get(dest)
        if isinstance(value, list):
            return " ".join(value)
        return default if value is None else value

    def integer(self, dest: str, default: int) -> int:
        try:
            return int(self.text(dest, str(default)))
        except ValueError:
            return default


def errors_of(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error"]
