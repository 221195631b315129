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


CITED = re.compile(r"\b(E\d\d|b[1-4])\b")
NUMBERED = re.compile(r"^\| (E\d\d|b[1-4]) \|", re.MULTILINE)


def test_every_number_the_source_cites_is_defined_on_the_page() -> None:
    """A comment may name a fault by its number (E06) or a mapping rule by its label (b1):
    the page defines each, as the number of a code or in its table of numbers."""
    page = (ROOT / "docs" / "stream-cases.md").read_text(encoding="utf-8")
    defined = set(NUMBERED.findall(page)) | {
        code.split("_", 1)[0] for code in DOCUMENTED.findall(page)
    }
    cited: dict[str, str] = {}
    for path in (ROOT / "solver").rglob("*.py"):
        for number in CITED.findall(path.read_text(encoding="utf-8")):
            cited.setdefault(number, str(path.relative_to(ROOT)))
    assert len(cited) > 20  # the pattern still finds the citations
    missing = {number: where for number, where in cited.items() if number not in defined}
    assert missing == {}, "numbers cited in the source but not defined in docs/stream-cases.md"
