"""Rebuild docs/benchmarks.md from its summary table and the per-benchmark pages.

``python bench/docs.py`` rewrites the file; ``--check`` exits 1 when it is out of date. The
summary table above the pages is kept as written (it is edited by hand with each new result);
each page ``docs/bench-*.md`` follows, its headings one level down.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = (
    "ingest",
    "proxy",
    "audit",
    "resume",
    "runs",
    "serve",
    "local-model",
    "answers",
    "report",
    "policy",
    "suite",
    "router",
    "orchestrator",
    "sandbox",
)
SUMMARY_END = "methods.\n"  # the last line of the summary's closing paragraph ends so


def demoted(page: str) -> str:
    """Every Markdown heading one level down; fenced code is left alone."""
    out: list[str] = []
    fenced = False
    for line in page.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("#"):
            line = "#" + line
        out.append(line)
    return "\n".join(out).rstrip() + "\n"


def build(current: str) -> str:
    head = current[: current.index(SUMMARY_END) + len(SUMMARY_END)]
    pages = [demoted((DOCS / f"bench-{name}.md").read_text(encoding="utf-8")) for name in PAGES]
    return head + "\n\n" + "\n\n".join(pages)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args()
    target = DOCS / "benchmarks.md"
    current = target.read_text(encoding="utf-8")
    wanted = build(current)
    if args.check:
        if wanted != current:
            print("docs/benchmarks.md is out of date: run python bench/docs.py", file=sys.stderr)
            return 1
        return 0
    target.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
