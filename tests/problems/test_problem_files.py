"""Reading problem files, and the digest of a normalised statement."""

from __future__ import annotations

import hashlib
import json
import unicodedata
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from solver.cli.problem import problem
from solver.problems import Problem, load_problem, normalise_statement, statement_digest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def test_markdown_front_matter_fields(tmp_path: Path) -> None:
    path = tmp_path / "p.md"
    raw = (
        b"---\n"
        b"id: demo-1\n"
        b"title: A title\n"
        b"source: Somewhere 2024\n"
        b"answer: 42\n"
        b"reference_solution: |\n  Because.\n"
        b"grading_guidelines: Full marks for a proof.\n"
        b"points: 10\n"
        b"---\n\n"
        b"Find the answer.  \n\n"
    )
    path.write_bytes(raw)
    loaded = load_problem(path)
    assert loaded.id == "demo-1"
    assert loaded.title == "A title"
    assert loaded.source == "Somewhere 2024"
    assert loaded.answer == "42"
    assert loaded.reference_solution == "Because.\n"
    assert loaded.grading_guidelines == "Full marks for a proof."
    assert loaded.points == 10
    assert loaded.statement == "Find the answer."
    assert loaded.original_bytes == raw
    assert loaded.original_digest == "sha256:" + hashlib.sha256(raw).hexdigest()
    assert loaded.digest == "sha256:" + hashlib.sha256(b"Find the answer.").hexdigest()
    assert loaded.origin == str(path)


def test_markdown_without_front_matter_takes_the_stem(tmp_path: Path) -> None:
    path = tmp_path / "plain-markdown.md"
    path.write_text("# Problem\n\n---\n\nProve it.\n", encoding="utf-8")
    loaded = load_problem(path)
    assert loaded.id == "plain-markdown"
    assert loaded.points == 7
    assert loaded.answer is None
    assert loaded.title == "Problem"  # the leading heading
    assert loaded.statement == "---\n\nProve it."


def test_front_matter_closed_by_dots_and_empty_front_matter(tmp_path: Path) -> None:
    dots = tmp_path / "dots.md"
    dots.write_text("---\nanswer: '1.50'\n...\nCompute it.\n", encoding="utf-8")
    assert load_problem(dots).answer == "1.50"
    empty = tmp_path / "empty-fm.md"
    empty.write_text("---\n---\nStatement.\n", encoding="utf-8")
    assert (load_problem(empty).id, load_problem(empty).statement) == ("empty-fm", "Statement.")


def test_txt_with_bom_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "p.txt"
    path.write_bytes(b"\xef\xbb\xbfLine one\r\nLine two\r\n")
    loaded = load_problem(path)
    assert loaded.statement == "Line one\nLine two"
    assert loaded.id == "p"


def test_tex_document_body_is_the_statement(tmp_path: Path) -> None:
    path = tmp_path / "p.tex"
    path.write_text(
        "\\documentclass{article}\n\\begin{document}\nShow that $1 < 2$.\n\\end{document}\n",
        encoding="utf-8",
    )
    assert load_problem(path).statement == "Show that $1 < 2$."
    bare = tmp_path / "bare.tex"
    bare.write_text("Show that $\\sqrt{2}$ is irrational.\n", encoding="utf-8")
    assert load_problem(bare).statement == "Show that $\\sqrt{2}$ is irrational."


def test_serialisation_round_trip_and_tamper_check(tmp_path: Path) -> None:
    path = tmp_path / "p.md"
    path.write_text("---\nanswer: '7'\n---\nCount them.\n", encoding="utf-8")
    loaded = load_problem(path)
    dumped = loaded.model_dump(mode="json")
    assert "original_bytes" not in dumped
    again = Problem.model_validate(dumped)
    assert again.digest == loaded.digest
    assert again.original_digest == loaded.original_digest
    dumped["statement"] = "Count them twice."
    with pytest.raises(ValidationError, match="does not match"):
        Problem.model_validate(dumped)


def test_problem_is_frozen_and_rejects_unknown_fields() -> None:
    made = Problem(id="x", statement="Prove it.")
    with pytest.raises(ValidationError):
        made.id = "y"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        Problem(id="x", statement="Prove it.", difficulty=3)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="empty statement"):
        Problem(id="x", statement=" \n ")


def test_normalisation_rules() -> None:
    decomposed = "Cafe\u0301"  # e + combining acute; NFC composes it
    assert normalise_statement(f"\n  \n{decomposed} \t\r\n\r\n  indented\rlast  \n\n") == (
        "Caf\u00e9\n\n  indented\nlast"
    )


line_text = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\r\n"),
    max_size=30,
)


@given(st.lists(line_text, min_size=1, max_size=8))
def test_line_endings_do_not_change_the_digest(lines: list[str]) -> None:
    lf = "\n".join(lines)
    crlf = "\r\n".join(lines)
    cr = "\r".join(lines)
    assert statement_digest(lf) == statement_digest(crlf) == statement_digest(cr)


@given(
    st.lists(line_text, min_size=1, max_size=8),
    st.lists(st.sampled_from([" ", "\t", "\u00a0", "  "]), min_size=8, max_size=8),
    st.integers(0, 3),
    st.integers(0, 3),
)
def test_trailing_whitespace_and_blank_edges_do_not_change_the_digest(
    lines: list[str], pads: list[str], leading: int, trailing: int
) -> None:
    padded = [line + pad for line, pad in zip(lines, pads, strict=False)]
    noisy = "\n" * leading + "\n".join(padded) + "\n" * trailing
    assert statement_digest(noisy) == statement_digest("\n".join(lines))


@given(line_text)
def test_nfc_and_nfd_share_a_digest(text: str) -> None:
    assert statement_digest(unicodedata.normalize("NFD", text)) == statement_digest(
        unicodedata.normalize("NFC", text)
    )


@given(line_text, line_text)
def test_visible_differences_change_the_digest(first: str, second: str) -> None:
    if normalise_statement(first) != normalise_statement(second):
        assert statement_digest(first) != statement_digest(second)


def test_digest_is_sha256_of_the_normalised_utf8() -> None:
    text = "  Prove:\u00a0x² ≥ 0  \r\n"
    expected = hashlib.sha256("  Prove:\u00a0x² ≥ 0".encode()).hexdigest()
    assert statement_digest(text) == f"sha256:{expected}"


@pytest.mark.parametrize(
    ("name", "has_answer", "has_reference"),
    [
        ("sum-of-two-odd-squares.md", False, False),
        ("imo-answerbench-algebra-001.md", True, False),
        ("imo-proofbench-basic-002.md", False, True),
    ],
)
def test_examples_load(name: str, has_answer: bool, has_reference: bool) -> None:
    loaded = load_problem(EXAMPLES / name)
    assert (loaded.answer is not None) == has_answer
    assert (loaded.reference_solution is not None) == has_reference
    assert (loaded.grading_guidelines is not None) == has_reference
    assert loaded.source
    assert name.removesuffix(".md") in (EXAMPLES / "README.md").read_text(encoding="utf-8")


def test_cli_show_prints_fields_and_json(tmp_path: Path) -> None:
    path = tmp_path / "p.md"
    path.write_text("---\nid: q1\nanswer: '5'\n---\nFind five.\n", encoding="utf-8")
    runner = CliRunner()
    text = runner.invoke(problem, ["show", str(path)])
    assert text.exit_code == 0, text.output
    assert "id:       q1" in text.stdout
    assert statement_digest("Find five.") in text.stdout
    assert "Find five." in text.stdout
    as_json = runner.invoke(problem, ["show", str(path), "--json"])
    assert as_json.exit_code == 0
    data = json.loads(as_json.stdout)
    assert data["id"] == "q1"
    assert data["answer"] == "5"
    assert data["digest"] == statement_digest("Find five.")
    assert Problem.model_validate(data).statement == "Find five."
