"""A run directory a kill left before its manifest became durable is started again, not
refused: the store writes the run's blobs (problem file, templates) before the manifest."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from solver.cli.eval import eval_group
from solver.testing import FakeEndpoint
from tests.evaluation.test_eval import PROBLEMS, eval_args, finished, write_set
from tests.report.responders import olympiad


def test_a_start_cut_short_before_its_manifest_is_started_again(tmp_path: Path) -> None:
    set_path = write_set(tmp_path / "set.jsonl", PROBLEMS[:1])
    out = tmp_path / "eval"
    with FakeEndpoint(olympiad) as fake:
        first = CliRunner().invoke(eval_group, eval_args(set_path, out, fake.url))
        assert first.exit_code == 0, first.output
        run_dir = out / "P1" / "run-1"
        # what a kill between the first blob and MANIFEST.json leaves behind
        for entry in list(run_dir.iterdir()):
            if entry.name != "blobs":
                if entry.is_dir():
                    for path in sorted(entry.rglob("*"), reverse=True):
                        path.unlink() if path.is_file() else path.rmdir()
                    entry.rmdir()
                else:
                    entry.unlink()
        (run_dir / "MANIFEST.json.tmp").write_bytes(b"{")
        again = CliRunner().invoke(eval_group, eval_args(set_path, out, fake.url, "--json"))
    assert again.exit_code == 0, again.output
    assert finished(run_dir)
    assert json.loads((run_dir / "final" / "result.json").read_text())["outcome"]
