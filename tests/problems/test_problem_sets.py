"""Problem-set readers: the four published formats, the generic mapping, the CLI summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from solver.cli.problem import problem
from solver.errors import InputError
from solver.problems import load_problem_set, parse_mapping, statement_digest

FIXTURES = Path(__file__).resolve().parent / "data"
SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
needs_shared = pytest.mark.skipif(
    not SHARED.is_dir(), reason="the shared data directory (../shared/data) is absent"
)


def test_proofbench_sample() -> None:
    loaded = load_problem_set(FIXTURES / "proofbench-sample.csv")
    assert loaded.format == "proofbench"
    assert loaded.ids == ("PB-Basic-001", "PB-Basic-002", "PB-Basic-003")
    first = loaded.by_id("PB-Basic-001")
    assert first.statement.startswith("Determine all functions $f: \\mathbb{Z}")
    assert first.reference_solution is not None
    assert first.reference_solution.startswith("By taking $x = 0$")
    assert first.grading_guidelines is not None
    assert first.grading_guidelines.startswith("(Partial)")
    assert (
        first.answer == "$f(x) = 0$ and $f(x) = 2x + c$ for all integer $x$ and some constant $c$."
    )
    assert first.source == "(Modified) IMO 2019, P1"
    assert first.metadata == {"Category": "Algebra", "Level": "IMO-easy"}
    # A blank "Short Answer" cell (a single space in the source) is no answer at all.
    assert loaded.by_id("PB-Basic-002").answer is None
    assert loaded.warnings == ()


def test_answerbench_sample() -> None:
    loaded = load_problem_set(FIXTURES / "answerbench-sample.csv")
    assert loaded.format == "answerbench"
    assert len(loaded) == 3
    first = loaded.problems[0]
    assert first.id == "imo-bench-algebra-001"
    assert first.answer == "3"
    assert first.source == "IMO Shortlist 2021"
    assert first.metadata == {"Category": "Algebra", "Subcategory": "Operation"}
    assert first.reference_solution is None
    assert first.origin == f"{FIXTURES / 'answerbench-sample.csv'}#row-1"
    # The cell ends with a newline in the source: kept in the original bytes, not the statement.
    assert first.original_bytes.endswith(b"$.\n")
    assert not first.statement.endswith("\n")


def test_answerbench_stray_quote_is_read_and_reported() -> None:
    loaded = load_problem_set(FIXTURES / "answerbench-stray-quote.csv")
    assert loaded.ids == ("imo-bench-algebra-036", "imo-bench-algebra-037")
    assert len(loaded.warnings) == 1
    assert "row 1: 5 fields, the header has 6" in loaded.warnings[0]
    assert loaded.by_id("imo-bench-algebra-037").answer == "$X(y)=1+(u-1) \\bar{y}$"


def test_deepseekmath_inputs_sample() -> None:
    loaded = load_problem_set(FIXTURES / "dsm-v2-imo2025-sample.json")
    assert loaded.format == "deepseekmath-v2"
    assert loaded.ids == ("IMO2025-1", "IMO2025-2")
    first = loaded.problems[0]
    assert first.answer == "k = 0, 1, 3 for all n"
    assert first.source == "IMO2025"
    assert first.metadata == {"id": "1"}
    assert "\\emph{sunny}" in first.statement


def test_proval_sample() -> None:
    loaded = load_problem_set(FIXTURES / "proval-sample.jsonl")
    assert loaded.format == "proval"
    assert len(loaded) == 3
    first = loaded.problems[0]
    assert first.id == "all-russian-mo-2026-01"
    assert first.source == "All-Russian MO"
    assert first.answer is None
    assert first.metadata["year"] == "2026"
    assert first.metadata["difficulty_rating"] == "3"
    assert first.metadata["domain"] == "combinatorics"
    assert first.statement.startswith("Initially, there are 75 candies")


@needs_shared
@pytest.mark.parametrize(
    ("name", "expected_format", "count", "first_id"),
    [
        ("imo-proofbench-v2.csv", "proofbench", 60, "PB-Basic-001"),
        ("imo-answerbench-v2.csv", "answerbench", 400, "imo-bench-algebra-001"),
        ("dsm-v2-imo2025-inputs.json", "deepseekmath-v2", 6, "IMO2025-1"),
        ("proval-2026-problems.jsonl", "proval", 132, "all-russian-mo-2026-01"),
    ],
)
def test_shared_sets(name: str, expected_format: str, count: int, first_id: str) -> None:
    loaded = load_problem_set(SHARED / name)
    assert loaded.format == expected_format
    assert len(loaded) == count
    assert loaded.ids[0] == first_id
    assert len(set(loaded.ids)) == count
    assert all(item.statement for item in loaded)


@needs_shared
def test_shared_proofbench_every_problem_has_a_solution_and_guidelines() -> None:
    loaded = load_problem_set(SHARED / "imo-proofbench-v2.csv")
    assert all(item.reference_solution and item.grading_guidelines for item in loaded)


@needs_shared
def test_fixtures_match_the_shared_sets() -> None:
    pairs = [
        ("proofbench-sample.csv", "imo-proofbench-v2.csv"),
        ("answerbench-sample.csv", "imo-answerbench-v2.csv"),
        ("dsm-v2-imo2025-sample.json", "dsm-v2-imo2025-inputs.json"),
        ("proval-sample.jsonl", "proval-2026-problems.jsonl"),
    ]
    for fixture, shared in pairs:
        small = load_problem_set(FIXTURES / fixture)
        full = load_problem_set(SHARED / shared)
        for item in small:
            original = full.by_id(item.id)
            assert original.digest == item.digest
            assert original.answer == item.answer
            assert original.reference_solution == item.reference_solution


def test_generic_csv_with_every_column(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    path.write_text(
        "id,statement,title,source,answer,reference_solution,grading_guidelines,points,level\n"
        'a1,"Prove A.\r\nWith a second line.",Title A,Here,,Ref A,Rubric A,10,easy\n'
        "a2,Compute B.,,,17,,,,\n",
        encoding="utf-8",
    )
    loaded = load_problem_set(path)
    assert loaded.format == "generic"
    first, second = loaded.problems
    assert first.statement == "Prove A.\nWith a second line."
    assert first.digest == statement_digest("Prove A.\nWith a second line.")
    assert (first.title, first.source, first.answer) == ("Title A", "Here", None)
    assert (first.reference_solution, first.grading_guidelines) == ("Ref A", "Rubric A")
    assert first.points == 10
    assert first.metadata == {"level": "easy"}
    assert (second.answer, second.points, second.metadata) == ("17", 7, {})


def test_generic_jsonl_without_ids_numbers_rows(tmp_path: Path) -> None:
    path = tmp_path / "numbers.jsonl"
    path.write_text(
        '{"statement": "One.", "answer": 1, "tags": ["x"]}\n\n{"statement": "Two.", "points": 3}\n',
        encoding="utf-8",
    )
    loaded = load_problem_set(path)
    assert loaded.ids == ("numbers-1", "numbers-2")
    assert loaded.problems[0].answer == "1"
    assert loaded.problems[0].metadata == {"tags": '["x"]'}
    assert loaded.problems[1].points == 3
    assert loaded.problems[1].origin == f"{path}#line-3"


def test_user_mapping_overrides_columns(tmp_path: Path) -> None:
    path = tmp_path / "other.csv"
    path.write_text("No.,Problem,Final\n1,Prove it.,\n2,Find it.,9\n", encoding="utf-8")
    mapping = parse_mapping(["statement=Problem", "id = No.", "answer=Final"])
    assert mapping == {"statement": "Problem", "id": "No.", "answer": "Final"}
    loaded = load_problem_set(path, mapping=mapping)
    assert loaded.ids == ("1", "2")
    assert loaded.by_id("2").answer == "9"
    assert loaded.by_id("1").answer is None
    assert loaded.problems[0].metadata == {}


def test_explicit_format_on_a_converted_file(tmp_path: Path) -> None:
    path = tmp_path / "proval.csv"
    path.write_text("problem_id,statement,source\nx-1,Prove X.,Somewhere\n", encoding="utf-8")
    loaded = load_problem_set(path, format="proval")
    assert (loaded.format, loaded.ids, loaded.problems[0].source) == (
        "proval",
        ("x-1",),
        "Somewhere",
    )


def test_digest_names_the_file_bytes(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"statement": "One."}\n', encoding="utf-8")
    before = load_problem_set(path).digest
    path.write_text('{"statement": "One." }\n', encoding="utf-8")
    assert load_problem_set(path).digest != before


def test_cli_set_info(tmp_path: Path) -> None:
    runner = CliRunner()
    text = runner.invoke(problem, ["set-info", str(FIXTURES / "proval-sample.jsonl")])
    assert text.exit_code == 0, text.output
    assert "format:   proval" in text.stdout
    assert "count:    3" in text.stdout
    assert "  all-russian-mo-2026-01" in text.stdout
    as_json = runner.invoke(
        problem, ["set-info", str(FIXTURES / "answerbench-stray-quote.csv"), "--json"]
    )
    assert as_json.exit_code == 0
    summary = json.loads(as_json.stdout)
    assert summary["format"] == "answerbench"
    assert summary["count"] == 2
    assert summary["ids"] == ["imo-bench-algebra-036", "imo-bench-algebra-037"]
    assert summary["with_answer"] == 2
    assert len(summary["warnings"]) == 1
    assert as_json.stderr.startswith("warning: ")


def test_cli_set_info_with_map_and_format(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    path.write_text("Q,A\nProve it.,\nFind it.,4\n", encoding="utf-8")
    result = CliRunner().invoke(
        problem,
        [
            "set-info",
            str(path),
            "--format",
            "generic",
            "--map",
            "statement=Q",
            "--map",
            "answer=A",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["ids"] == ["mine-1", "mine-2"]
    assert summary["with_answer"] == 1


@pytest.mark.parametrize(
    ("row", "note"),
    [
        ({"id": "a", "problem": "Prove A."}, "statement <- 'problem'"),
        ({"id": "a", "question": "Prove A.", "final_answer": "3"}, "statement <- 'question'"),
        ({"id": "a", "prompt": "Prove A.", "solution": "Ref."}, "statement <- 'prompt'"),
        ({"id": "a", "statement": "Prove A.", "reference_solution": "Ref."}, ""),
        ({"problem_id": "a", "problem": "Prove A.", "answer": "3"}, "id <- 'problem_id'"),
    ],
)
def test_common_shapes_load_with_a_note(tmp_path: Path, row: dict[str, str], note: str) -> None:
    path = tmp_path / "common.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    loaded = load_problem_set(path)
    (item,) = loaded.problems
    assert (loaded.format, item.id, item.statement) == ("generic", "a", "Prove A.")
    assert item.answer == (row.get("answer") or row.get("final_answer"))
    assert item.reference_solution == (row.get("solution") or row.get("reference_solution"))
    assert item.metadata == {}
    if note:
        assert note in loaded.mapping_note
    else:
        assert loaded.mapping_note == ""


def test_own_key_wins_over_an_alias(tmp_path: Path) -> None:
    path = tmp_path / "both.jsonl"
    path.write_text('{"statement": "Mine.", "problem": "Other."}\n', encoding="utf-8")
    loaded = load_problem_set(path)
    assert loaded.problems[0].statement == "Mine."
    assert loaded.problems[0].metadata == {"problem": "Other."}
    assert loaded.mapping_note == ""


def test_unknown_shape_names_its_keys_and_the_map_option(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_text('{"key": "a", "text": "Prove A."}\n', encoding="utf-8")
    with pytest.raises(InputError) as raised:
        load_problem_set(path)
    message = str(raised.value)
    assert "keys found: 'key', 'text'" in message
    assert "--map statement=<key>" in message
    assert "'problem', 'question', 'prompt'" in message
    loaded = load_problem_set(path, mapping=parse_mapping(["statement=text", "id=key"]))
    assert loaded.ids == ("a",)


def test_cli_set_info_prints_the_mapping_note(tmp_path: Path) -> None:
    path = tmp_path / "hub.jsonl"
    path.write_text('{"id": "x", "problem": "Prove X.", "final_answer": "1"}\n')
    result = CliRunner().invoke(problem, ["set-info", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert "note: generic format read with statement <- 'problem', answer <- 'final_answer'" in (
        result.stderr
    )
    assert json.loads(result.stdout)["mapping_note"].endswith("answer <- 'final_answer'")
