"""`solver status` and `solver report` refuse what the audit refuses: a record of a type this
solver does not know, a loop record at another version, a store record at a version the run's
format does not have. Each is a one-line error naming the record, exit 65, no traceback;
a run made before the redesign (tests/fixtures/run-v1-signed) still reads."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from solver.store import canonical_json
from tests.loop import scripts
from tests.loop.harness import ScriptedEndpoint, solve

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "run-v1-signed"


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("made")
    with ScriptedEndpoint(scripts.solved) as fake:
        return solve(fake, tmp, candidates=1).run_dir


def _h(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _rewrite(run: Path, change: Callable[[list[dict[str, Any]]], None]) -> None:
    """Change the records, then chain them again (so only the change is wrong)."""
    records = [json.loads(line) for line in (run / "journal.jsonl").read_bytes().splitlines()]
    change(records)
    prev, lines = _h((run / "MANIFEST.json").read_bytes()), []
    for seq, record in enumerate(records):
        line = canonical_json({**record, "seq": seq, "prev": prev})
        prev = _h(line)
        lines.append(line + b"\n")
    (run / "journal.jsonl").write_bytes(b"".join(lines))
    shutil.rmtree(run / "final")  # what the journal no longer names; not what is tested


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "solver", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _add_unknown(records: list[dict[str, Any]]) -> None:
    records.insert(3, {**records[2], "type": "loop.future", "data": {}})


def _loop_v2(records: list[dict[str, Any]]) -> None:
    planned = next(r for r in records if r["type"] == "call.planned")
    planned["v"] = 2


def _store_v9(records: list[dict[str, Any]]) -> None:
    records[0]["v"] = 9


CASES = {
    "unknown type": (_add_unknown, "record 3 has type 'loop.future'"),
    "loop record v2": (_loop_v2, "has version 2"),
    "store record v9": (_store_v9, "run.created v9 is not a version this solver reads"),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("verb", ["status", "report"])
def test_status_and_report_refuse_what_they_do_not_know(
    finished: Path, tmp_path: Path, verb: str, case: str
) -> None:
    run = Path(shutil.copytree(finished, tmp_path / "run"))
    change, said = CASES[case]
    _rewrite(run, change)
    done = _cli(verb, str(run), cwd=tmp_path)
    assert done.returncode == 65, done.stderr
    assert said in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize("verb", ["status", "report"])
def test_the_pre_redesign_run_still_reads(tmp_path: Path, verb: str) -> None:
    run = Path(shutil.copytree(FIXTURE, tmp_path / FIXTURE.name))
    done = _cli(verb, "--json", str(run), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)
