"""OUT/results.html: the evaluation's tables as one self-contained page.

The page is made from results.md itself (its headings, lists and tables), so the two can never
say different things; the chart beside them, when drawn, is shown under the title."""

from __future__ import annotations

import html

_CSS = (
    "body{font:15px/1.5 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2329}"
    "main{max-width:1180px;margin:0 auto;padding:20px 28px 60px}"
    "h1{font-size:22px}h2{font-size:18px;margin-top:26px;border-bottom:1px solid #d5dae0}"
    "table{border-collapse:collapse;font-size:13.5px;background:#fff}"
    "td,th{padding:3px 9px;border:1px solid #e3e6ea;text-align:left}th{background:#f1f3f5}"
    "img{max-width:100%;background:#fff;border:1px solid #e0e4e8}"
)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def results_page(markdown: str, chart: str | None) -> str:
    """HTML for the markdown that :func:`results_markdown` writes (no other markdown)."""
    out: list[str] = []
    table: list[list[str]] = []
    items: list[str] = []

    def flush() -> None:
        if items:
            out.append("<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in items) + "</ul>")
            items.clear()
        if table:
            head, *rows = table
            out.append(
                "<table><tr>"
                + "".join(f"<th>{html.escape(c)}</th>" for c in head)
                + "</tr>"
                + "".join(
                    "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                    for row in rows
                )
                + "</table>"
            )
            table.clear()

    title = "Evaluation"
    for line in markdown.splitlines():
        if line.startswith("|"):
            if not set(line) <= set("|-: "):  # the separator row carries nothing
                table.append(_cells(line))
            continue
        if line.startswith("- "):
            items.append(line[2:])
            continue
        flush()
        if line.startswith("# "):
            title = line[2:]
            out.append(f"<h1>{html.escape(title)}</h1>")
            if chart:
                out.append(f'<p><img src="{html.escape(chart)}" alt="mean score per problem"></p>')
        elif line.startswith("## "):
            out.append(f"<h2>{html.escape(line[3:])}</h2>")
        elif line.strip():
            out.append(f"<p>{html.escape(line)}</p>")
    flush()
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head>"
        f"<body><main>{''.join(out)}</main></body></html>\n"
    )
