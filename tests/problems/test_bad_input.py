"""Every bad input of the issue: one line naming the file and the fault, exit 2, no traceback."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from solver.cli.problem import problem
from solver.errors import EXIT_INPUT, InputError
from solver.problems import MAX_PROBLEM_BYTES, load_problem, load_problem_set

# name -> (file name, bytes to write or None for "create nothing", fragment of the message)
PROBLEM_FILE_CASES: dict[str, tuple[str, bytes | None, str]] = {
    "missing file": ("absent.md", None, "no such file"),
    "empty statement": ("empty.md", b"---\nid: x\n---\n\n  \t\n\n", "empty statement"),
    "empty txt": ("blank.txt", b"\n   \r\n\t\n", "empty statement"),
    "empty tex document": (
        "empty.tex",
        b"\\documentclass{article}\n\\begin{document}\n  \n\\end{document}\n",
        "empty statement",
    ),
    "front matter syntax": (
        "syntax.md",
        b"---\nid: [unclosed\n---\nBody\n",
        "invalid front matter",
    ),
    "front matter not a mapping": (
        "list.md",
        b"---\n- a\n- b\n---\nBody\n",
        "invalid front matter",
    ),
    "front matter unclosed": ("open.md", b"---\nid: x\nBody\n", "no closing '---'"),
    "front matter points": ("points.md", b"---\npoints: many\n---\nBody\n", "'points'"),
    "front matter zero points": ("zero.md", b"---\npoints: 0\n---\nBody\n", "'points'"),
    "front matter answer not text": ("yes.md", b"---\nanswer: yes\n---\nBody\n", "quote it"),
    "unknown front-matter key": (
        "key.md",
        b"---\nid: x\ndifficulty: 3\n---\nBody\n",
        "unknown front-matter key 'difficulty'",
    ),
    "non-UTF-8 bytes": ("latin1.txt", "Prove that café.\n".encode("latin-1"), "not valid UTF-8"),
    "binary file": ("image.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file"),
    "unknown extension": ("problem.pdf", b"Prove it.\n", "unknown extension '.pdf'"),
    "no extension": ("problem", b"Prove it.\n", "unknown extension none"),
    "over 1 MiB": ("huge.txt", b"a" * (MAX_PROBLEM_BYTES + 1), "over the 1 MiB limit"),
}

SET_CASES: dict[str, tuple[str, bytes | None, str]] = {
    "duplicate ids (CSV)": (
        "dup.csv",
        b"id,statement\np1,First.\np2,Second.\np1,Third.\n",
        "duplicate id 'p1' (row 1 and row 3)",
    ),
    "duplicate ids (JSONL)": (
        "dup.jsonl",
        b'{"problem_id": "a", "statement": "One."}\n{"problem_id": "a", "statement": "Two."}\n',
        "duplicate id 'a' (line 1 and line 2)",
    ),
    "CSV missing its statement column": (
        "nostatement.csv",
        b"id,question_text\np1,Prove it.\n",
        "no statement column 'statement' (nor 'problem', 'question', 'prompt') (generic "
        "format); columns found: 'id', 'question_text'; name it with --map statement=<column>",
    ),
    "set row with empty statement": (
        "blank.csv",
        b"id,statement\np1,  \n",
        "row 1: empty statement",
    ),
    "set missing file": ("absent.csv", None, "no such file"),
    "set unknown extension": ("set.xlsx", b"PK\x03\x04", "unknown extension '.xlsx'"),
    "set non-UTF-8": ("latin.csv", "id,statement\np,é\n".encode("latin-1"), "not valid UTF-8"),
    "set binary": ("bin.jsonl", b"\x00\x01\x02", "binary file"),
    "set invalid JSON line": ("bad.jsonl", b'{"statement": "x"}\n{nope\n', "line 2: invalid JSON"),
    "JSON not a list": ("obj.json", b'{"statement": "x"}', "a JSON problem set is a list"),
    "JSONL row not an object": ("arr.jsonl", b"[1, 2]\n", "line 1: expected a JSON object"),
    "set without rows": ("empty.csv", b"id,statement\n", "no problems in the set"),
    "empty CSV": ("nothing.csv", b"", "no header row"),
    "CSV row too long": ("wide.csv", b"id,statement\np1,Prove.,extra\n", "row 1: 3 fields"),
    "set bad points": ("pts.csv", b"id,statement,points\np1,Prove.,lots\n", "row 1: points"),
}


def _make(tmp_path: Path, name: str, content: bytes | None) -> Path:
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    return path


def _assert_one_clean_line(message: str, path: Path, fragment: str) -> None:
    assert message.count("\n") == 0, message
    assert message.startswith(f"{path}: "), message
    assert fragment in message, message


def _assert_cli_rejects(args: list[str], path: Path, fragment: str) -> None:
    result = CliRunner().invoke(problem, args)
    assert result.exit_code == EXIT_INPUT, (result.exit_code, result.output)
    assert isinstance(result.exception, SystemExit)  # not an uncaught error
    assert "Traceback" not in result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {path}: "), lines[0]
    assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("case", sorted(PROBLEM_FILE_CASES))
def test_problem_file_rejected(tmp_path: Path, case: str) -> None:
    name, content, fragment = PROBLEM_FILE_CASES[case]
    path = _make(tmp_path, name, content)
    with pytest.raises(InputError) as caught:
        load_problem(path)
    _assert_one_clean_line(str(caught.value), path, fragment)
    _assert_cli_rejects(["show", str(path)], path, fragment)


@pytest.mark.parametrize("case", sorted(SET_CASES))
def test_problem_set_rejected(tmp_path: Path, case: str) -> None:
    name, content, fragment = SET_CASES[case]
    path = _make(tmp_path, name, content)
    with pytest.raises(InputError) as caught:
        load_problem_set(path)
    _assert_one_clean_line(str(caught.value), path, fragment)
    _assert_cli_rejects(["set-info", str(path)], path, fragment)


@pytest.mark.parametrize(
    ("reader", "command"),
    [(load_problem, "show"), (load_problem_set, "set-info")],
)
def test_directory_rejected(tmp_path: Path, reader: Callable[[Path], object], command: str) -> None:
    directory = tmp_path / "problems.md"
    directory.mkdir()
    with pytest.raises(InputError) as caught:
        reader(directory)
    _assert_one_clean_line(str(caught.value), directory, "is a directory")
    _assert_cli_rejects([command, str(directory)], directory, "is a directory")


def test_fifo_rejected_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    with pytest.raises(InputError) as caught:
        load_problem(fifo)
    _assert_one_clean_line(str(caught.value), fifo, "not a regular file")


def test_yaml_error_spanning_lines_is_one_line(tmp_path: Path) -> None:
    path = _make(tmp_path, "tabs.md", b"---\nid: x\n\tanswer: 3\n---\nBody\n")
    with pytest.raises(InputError) as caught:
        load_problem(path)
    _assert_one_clean_line(str(caught.value), path, "invalid front matter")


def test_set_mapping_errors_name_the_file(tmp_path: Path) -> None:
    path = _make(tmp_path, "s.csv", b"Problem,Answer\nProve it.,3\n")
    with pytest.raises(InputError) as unknown_field:
        load_problem_set(path, mapping={"difficulty": "Answer"})
    _assert_one_clean_line(str(unknown_field.value), path, "unknown field 'difficulty'")
    with pytest.raises(InputError) as missing_column:
        load_problem_set(path, mapping={"statement": "Problem", "answer": "Short"})
    _assert_one_clean_line(str(missing_column.value), path, "no answer column 'Short'")
    with pytest.raises(InputError) as unknown_format:
        load_problem_set(path, format="imo-2030")
    _assert_one_clean_line(str(unknown_format.value), path, "unknown set format 'imo-2030'")


def test_cli_rejects_malformed_map_option(tmp_path: Path) -> None:
    path = _make(tmp_path, "s.csv", b"Problem\nProve it.\n")
    result = CliRunner().invoke(problem, ["set-info", str(path), "--map", "statement"])
    assert result.exit_code == EXIT_INPUT
    assert result.stderr.strip() == "error: --map: expected FIELD=COLUMN, got 'statement'"
