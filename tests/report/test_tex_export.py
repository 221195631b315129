"""`solver report RUN --latex/--pdf`: the final proof as LaTeX, with the model's text unable to
make TeX read, write or run anything."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from solver.cli.main import main
from solver.report import load_report
from solver.report.tex_export import (
    ALLOWED_COMMANDS,
    ALLOWED_ENVIRONMENTS,
    compile_pdf,
    find_engine,
    markdown_to_latex,
    render_latex,
)

HOSTILE = r"""## Proof

\input{/etc/hostname} and \include{x} then \immediate\write18{touch PWNED}.
\newwrite\f \immediate\openout\f=leak.tex \catcode`\^=7 \def\x{y} \csname input\endcsname
^^5cinput{/etc/hostname} and $^^5cwrite18{touch PWNED}$ and \^^5c.
}}}} \end{document} \begin{filecontents}{evil.tex}bad\end{filecontents}
Text with # and % and & and _ and ~ and a **bold $x_1$** and *italic* and `\input{code}`.

$$
\sum_{i=1}^{n} i = \frac{n(n+1)}{2} \input{/etc/hostname} }
$$

\begin{align*}
a &= b \\ \write18{id}
\end{align*}

```
\end{verbatim} \input{/etc/hostname}
```

- item one with $\le$
- item two \openin
"""

# What the document itself uses around the converted text (preamble aside).
OURS = {"begin", "end", "mbox", "textbackslash", "section", "subsection", "maketitle", "item"}
OURS |= {"textbf", "texttt", "emph", "ttfamily", "medskip", "hrule", "title", "date"}
OURS |= {"textasciicircum", "textasciitilde", "textless", "textgreater", "textbar"}
OURS |= {"subsubsection", "paragraph"}


def _body(document: str) -> str:
    return document.split("\\begin{document}", 1)[1].rsplit("\\end{document}", 1)[0]


def test_hostile_proof_text_can_only_typeset() -> None:
    body = markdown_to_latex(HOSTILE)
    commands = set(re.findall(r"\\([A-Za-z]+)", body))
    assert commands <= ALLOWED_COMMANDS | OURS, commands - ALLOWED_COMMANDS - OURS
    for name in ("input", "write", "openout", "immediate", "catcode", "def", "csname", "include"):
        assert f"\\{name}" not in body.replace(f"\\textbackslash{{}}{name}", "")
        assert name not in ALLOWED_COMMANDS
    environments = set(re.findall(r"\\(?:begin|end)\{([^}]*)\}", body))
    assert environments <= ALLOWED_ENVIRONMENTS
    assert "^^" not in body
    # every brace opened in the text is closed within it
    depth = 0
    for match in re.finditer(r"(?<!\\)[{}]", body):
        depth += 1 if match.group(0) == "{" else -1
        assert depth >= 0
    assert depth == 0
    # the refused commands are shown, as their names
    assert "\\mbox{\\textbackslash{}input}" in body and "\\mbox{\\textbackslash{}write}" in body


def test_markdown_becomes_latex() -> None:
    body = markdown_to_latex("## Lemma\n\nBy **parity**, $x^2 \\equiv 1$.\n\n1. one\n2. two\n")
    assert "\\subsection*{Lemma}" in body
    assert "\\textbf{parity}" in body and "$x^2 \\equiv 1$" in body
    assert "\\begin{enumerate}" in body and "\\item one" in body
    after = markdown_to_latex("$$x^2$$ so done.\n")  # text after a display stays
    assert "\\[\nx^2\n\\]" in after and "so done." in after


def test_the_document_says_whether_the_proof_was_accepted(finished_run: Path) -> None:
    report = load_report(finished_run)
    accepted = render_latex(report)
    assert "\\textbf{Accepted.}" in accepted and "NOT ACCEPTED" not in accepted
    assert report.selected is not None
    rejected = render_latex(replace(report, selected={**report.selected, "accepted": False}))
    assert "NOT ACCEPTED. This proof did not pass" in _body(rejected).split("\\section*")[0]
    statement = str(report.problem["statement"])
    assert statement in _body(accepted)


@pytest.mark.skipif(find_engine() is None, reason="no TeX engine installed (make tex)")
def test_the_pdf_of_a_hostile_proof_compiles_and_touches_nothing(
    finished_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    report = load_report(finished_run)
    document = render_latex(replace(report, proof_text=HOSTILE))
    pdf = compile_pdf(document)
    assert pdf.startswith(b"%PDF")
    assert not list(tmp_path.iterdir())  # nothing written where we stand
    # and the engine's own sandbox holds even for raw TeX: no shell escape
    marker = tmp_path / "PWNED"
    raw = (
        "\\documentclass{article}\\begin{document}x"
        f"\\immediate\\write18{{touch {marker}}}\\end{{document}}\n"
    )
    assert compile_pdf(raw).startswith(b"%PDF")
    assert not marker.exists()


@pytest.mark.skipif(find_engine() is None, reason="no TeX engine installed (make tex)")
def test_report_writes_latex_and_pdf(finished_run: Path, tmp_path: Path) -> None:
    tex, pdf = tmp_path / "proof.tex", tmp_path / "proof.pdf"
    result = CliRunner().invoke(
        main, ["report", str(finished_run), "--latex", str(tex), "--pdf", str(pdf)]
    )
    assert result.exit_code == 0, result.output
    assert tex.read_text().startswith("\\documentclass")
    assert pdf.read_bytes().startswith(b"%PDF")


def test_pdf_without_a_tex_engine_names_the_install_step(
    finished_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert shutil.which("pdflatex") is None
    result = CliRunner().invoke(
        main, ["report", str(finished_run), "--pdf", str(tmp_path / "p.pdf")]
    )
    assert result.exit_code == 2
    assert "no TeX engine found" in result.output and "apt-get install" in result.output
    assert result.output.count("\n") == 1 and not (tmp_path / "p.pdf").exists()
