"""docs/stream-cases.md defines every case code the journal or the proxy's telemetry can carry,
and nothing else: the codes are read out of the source where they are written."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# a code is written as cases.add("..."), cases.append("...") or record.cases = "..."
WRITTEN = re.compile(r"""cases(?:\.add|\.append)\(\s*f?"([^"]+)"|\.cases = "(\w+)\"""")
DOCUMENTED = re.compile(r"^\| `([^`]+)` \|", re.MULTILINE)


def _written() -> set[str]:
    codes: set[str] = set()
    for path in (ROOT / "solver").rglob("*.py"):
        for match in WRITTEN.finditer(path.read_text(encoding="utf-8")):
            code = match.group(1) or match.group(2)
            codes.add(re.sub(r"\{[^}]+\}", "<type>", code))
    return codes


def test_every_written_code_is_defined_and_every_defined_code_is_written() -> None:
    page = (ROOT / "docs" / "stream-cases.md").read_text(encoding="utf-8")
    documented = set(DOCUMENTED.findall(page))
    written = _written()
    assert len(written) > 30  # the pattern still finds the codes
    assert written - documented == set(), "codes written but not in docs/stream-cases.md"
    assert documented - written == set(), "codes in docs/stream-cases.md that nothing writes"
