"""Problem files as public repositories write them: a Markdown heading and a trailing metadata
line are not part of the statement, a LaTeX file's statement is its problem environment, and a
file holding a solution write-up is flagged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from solver.cli.main import main
from solver.errors import InputError
from solver.problems import load_problem, load_problem_set, read_problem
from solver.problems.layout import split_markdown

DATA = Path(__file__).parent / "data" / "repo-layout"


@pytest.mark.parametrize("number", [1, 2])
def test_markdown_and_set_json_give_one_statement(number: int) -> None:
    from_md = load_problem(DATA / f"problem-0{number}.md")
    from_set = {p.id: p for p in load_problem_set(DATA / "problems.json")}[
        f"contest-2026-0{number}"
    ]
    assert from_md.statement == from_set.statement
    assert from_md.digest == from_set.digest
    assert from_md.title == f"Contest 2026 — Problem {number}"
    assert "#" not in from_md.statement and "Domain" not in from_md.statement
    # the trailing line's keys are the set's own column names, with the same values
    for key in ("domain", "task"):
        assert from_md.metadata[key] == from_set.metadata[key]


def test_front_matter_title_wins_and_the_heading_is_kept_as_metadata(tmp_path: Path) -> None:
    path = tmp_path / "p.md"
    path.write_text("---\ntitle: Given\n---\n\n## Problem 4\n\nProve it.\n", encoding="utf-8")
    loaded = load_problem(path)
    assert (loaded.title, loaded.statement, loaded.metadata) == (
        "Given",
        "Prove it.",
        {"heading": "Problem 4"},
    )


@pytest.mark.parametrize(
    ("body", "statement", "metadata"),
    [
        # a rule without a blank line above is a setext underline: nothing is taken
        ("Prove it.\n---\n*Domain: algebra*\n", "Prove it.\n---\n*Domain: algebra*", {}),
        # a rule followed by prose is part of the statement
        ("Part one.\n\n---\n\nPart two.\n", "Part one.\n\n---\n\nPart two.", {}),
        (
            "Prove it.\n\n***\n**Source:** Shortlist 2019 | **Level:** hard\n",
            "Prove it.",
            {"source": "Shortlist 2019", "level": "hard"},
        ),
        ("Setext title\n===\n\nProve it.\n", "Prove it.", {}),
    ],
)
def test_markdown_parts(body: str, statement: str, metadata: dict[str, str]) -> None:
    parts = split_markdown(body)
    assert parts.statement.strip() == statement
    assert parts.metadata == metadata


def test_a_heading_alone_is_the_statement(tmp_path: Path) -> None:
    path = tmp_path / "p.md"
    path.write_text("# Prove that $1 < 2$.\n", encoding="utf-8")
    loaded = load_problem(path)
    assert (loaded.statement, loaded.title) == ("Prove that $1 < 2$.", None)


def test_a_heading_of_a_megabyte_of_spaces_is_linear(tmp_path: Path) -> None:
    path = tmp_path / "wide.md"
    path.write_text("# " + " " * 900_000 + "x\n\nProve it.\n", encoding="utf-8")
    assert load_problem(path).title == "x"


def test_a_megabyte_of_unclosed_documents_is_refused_in_linear_time(tmp_path: Path) -> None:
    path = tmp_path / "many.tex"
    path.write_text("\\begin{document}" * 60_000, encoding="utf-8")
    with pytest.raises(InputError, match="no whole document"):
        load_problem(path)


def test_problem_show_prints_exactly_the_statement_the_model_gets() -> None:
    path = DATA / "problem-01.md"
    loaded = load_problem(path)
    result = CliRunner().invoke(main, ["problem", "show", str(path)])
    assert result.exit_code == 0, result.output
    head, _, statement = result.output.partition("statement (exactly what the model gets")
    assert statement.split("):\n", 1)[1] == loaded.statement + "\n"
    assert "domain: number_theory" in head and "title:    Contest 2026" in head
    as_json = CliRunner().invoke(main, ["problem", "show", "--json", str(path)])
    shown = json.loads(as_json.output)
    assert shown["statement"] == loaded.statement
    assert shown["metadata"] == {"domain": "number_theory", "task": "proof_only"}
    assert as_json.stderr == ""


TEX = "\\documentclass{article}\n\\title{Set 3}\n\\begin{document}\n\\maketitle\n"


def test_tex_problem_environment_is_the_statement_and_the_solution_is_left_out(
    tmp_path: Path,
) -> None:
    path = tmp_path / "p.tex"
    path.write_text(
        TEX
        + "\\section{Problem}\n\\begin{problem}[Odd squares]\n"
        + "Prove that $a^2+b^2$ is not a square. % a note\n\\end{problem}\n"
        + "\\begin{solution}\nWork modulo $4$.\n\\end{solution}\n\\end{document}\n",
        encoding="utf-8",
    )
    read = read_problem(path)
    assert read.problem.statement == "Prove that $a^2+b^2$ is not a square."
    assert read.problem.title == "Odd squares"
    assert len(read.warnings) == 1 and "solution write-up" in read.warnings[0]
    assert "modulo" not in read.problem.statement


def test_tex_solution_inside_the_problem_environment_is_left_out(tmp_path: Path) -> None:
    path = tmp_path / "p.tex"
    path.write_text(
        "\\begin{exercise}\nShow $1<2$.\n\\begin{proof}\nClear.\n\\end{proof}\n\\end{exercise}\n",
        encoding="utf-8",
    )
    read = read_problem(path)
    assert read.problem.statement == "Show $1<2$."
    assert read.warnings and "\\begin{proof}" in read.warnings[0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            TEX + "\\begin{problem}A\\end{problem}\\begin{prob}B\\end{prob}\\end{document}",
            "holds 2 problem environments",
        ),
        (TEX + "Prove that $1<2$.\n\\end{document}", "'\\\\maketitle' and no problem"),
        (
            "Show $1<2$.\n\\begin{proof}\nClear.\n\\end{proof}\n",
            "'\\\\begin{proof}' and no problem environment",
        ),
        ("\\begin{problem}\nShow it.\n", "is never closed"),
        ("\\documentclass{article}\nShow it.\n", "no whole document"),
    ],
)
def test_ambiguous_tex_is_refused_with_one_line(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.tex"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_problem(path)
    assert expected in str(caught.value) and "\n" not in str(caught.value)
    result = CliRunner().invoke(main, ["problem", "show", str(path)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("name", "text", "sign"),
    [
        ("p.md", "Prove it.\n\n## Solution\n\nBy induction.\n", "## Solution"),
        ("p.md", "Prove it.\n\n**Proof.** By induction.\n", "**Proof.**"),
        ("p.txt", "Prove it.\nProof: by induction.\n", "Proof:"),
    ],
)
def test_a_solution_write_up_gets_a_warning_not_an_error(
    tmp_path: Path, name: str, text: str, sign: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(main, ["problem", "show", str(path)])
    assert result.exit_code == 0
    assert "warning:" in result.stderr and "solution write-up" in result.stderr
    assert sign in result.stderr
    assert "warning" not in result.stdout


def test_a_statement_that_mentions_proofs_gets_no_warning(tmp_path: Path) -> None:
    path = tmp_path / "p.md"
    path.write_text("Prove that a proof exists.\n\nGive a solution for $n=3$.\n")
    assert read_problem(path).warnings == ()
