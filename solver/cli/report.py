"""`solver report RUN`: a readable account of one run, from its directory alone."""

from __future__ import annotations

import json
from pathlib import Path

import click

from solver._util.terminal import json_visible
from solver.cli.errors import reports_errors
from solver.errors import InputError, NotFound
from solver.report import (
    DEFAULT_MAX_CHARS,
    compile_pdf,
    find_engine,
    load_report,
    load_search,
    render_html,
    render_latex,
    render_markdown,
)
from solver.store import StorageFull, write_atomic


def refuse_inside_run(path: Path) -> None:
    """An output file may not land in a run directory (``--html RUN/journal.jsonl`` would
    destroy the run, and anything else there breaks its audit)."""
    target = path.resolve()
    for directory in target.parents:
        if (directory / "MANIFEST.json").is_file() or (directory / "journal.jsonl").exists():
            raise InputError(
                f"{path}: is inside the run directory {directory}; write reports elsewhere"
            )


def _write(path: Path, text: str) -> None:
    _write_bytes(path, text.encode("utf-8"))


def _write_bytes(path: Path, data: bytes) -> None:
    """Atomically: the old report stays whole until the new one is complete (a full disk
    keeps it and exits 74)."""
    if path.is_dir():
        raise InputError(f"{path}: is a directory")
    try:
        write_atomic(path, data)
    except StorageFull:
        raise
    except OSError as exc:
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None


@click.command("report")
@click.argument("run_dir", metavar="RUN", type=click.Path(path_type=Path))
@click.option(
    "--html",
    "html_file",
    type=click.Path(path_type=Path),
    help="Also write one self-contained HTML file (no network needed to view it).",
)
@click.option(
    "--md",
    "md_file",
    type=click.Path(path_type=Path),
    help="Write the Markdown here instead of to stdout.",
)
@click.option(
    "--latex",
    "latex_file",
    type=click.Path(path_type=Path),
    help="Also write the final proof as a LaTeX document (the model's text made safe).",
)
@click.option(
    "--pdf",
    "pdf_file",
    type=click.Path(path_type=Path),
    help="Also write that document as a PDF (needs pdflatex, xelatex, lualatex or tectonic).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report's data as JSON.")
@click.option(
    "--max-chars",
    type=click.IntRange(min=1000),
    default=DEFAULT_MAX_CHARS,
    show_default=True,
    help="Cap on each prompt or response text in the HTML.",
)
@reports_errors
def report(
    run_dir: Path,
    html_file: Path | None,
    md_file: Path | None,
    latex_file: Path | None,
    pdf_file: Path | None,
    as_json: bool,
    max_chars: int,
) -> None:
    """Summarise RUN: problem, outcome, selected proof, each candidate's lineage, every call,
    a timeline, tokens and time per role. Reads only the run directory, takes no lock, and
    works on an unfinished or running run."""
    if not run_dir.is_dir():
        raise NotFound(f"{run_dir}: no such run directory")
    if not (run_dir / "MANIFEST.json").is_file():
        raise NotFound(f"{run_dir}: not a run directory (no MANIFEST.json)")
    for output in (html_file, md_file, latex_file, pdf_file):
        if output is not None:
            refuse_inside_run(output)
    if pdf_file is not None and find_engine() is None:
        compile_pdf("")  # says which engines it looks for and how to install one (exit 2)
    loaded = load_report(run_dir, with_texts=html_file is not None, max_chars=max_chars)
    search = load_search(run_dir)
    if html_file is not None:
        _write(html_file, render_html(loaded, search))
    if latex_file is not None or pdf_file is not None:
        document = render_latex(loaded)
        if latex_file is not None:
            _write(latex_file, document)
            click.echo(f"latex: {latex_file}", err=True)
        if pdf_file is not None:
            _write_bytes(pdf_file, compile_pdf(document))
            click.echo(f"pdf: {pdf_file}", err=True)
    if as_json:
        shown = json.dumps(loaded.to_json(), sort_keys=True, ensure_ascii=False)
        click.echo(json_visible(shown))
    elif md_file is not None:
        _write(md_file, render_markdown(loaded, search))
    else:
        click.echo(render_markdown(loaded, search))
    if html_file is not None and not as_json:
        click.echo(f"html: {html_file}", err=True)
