"""`solver eval SET --shard K/N` on N machines (here N local processes) sharing one output
directory, and `solver eval merge OUT`: deterministic split, no clobbering, a dead shard
continued by its own command, one merge that scores and audits the whole set."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from solver.cli.eval import eval_group
from solver.evaluation.shard import Shard, shard_jobs
from solver.testing import FakeEndpoint
from tests.report.responders import REPO, kill_eval_when, olympiad, slow

DOCS = REPO / "docs" / "examples"

PROBLEMS = [
    {
        "id": f"P{i}",
        "statement": f"Prove that the sum of two odd squares is never a square ({i}).",
        "reference_solution": "Squares are 0 or 1 modulo 4.",
    }
    for i in range(1, 5)
]
PROBLEMS[1]["statement"] = "HARD: " + PROBLEMS[1]["statement"]
FAST = ["--candidates", "1", "--verifications", "1", "--accept", "1", "--graders", "2"]


def shard_argv(set_path: Path, out: Path, url: str, k: int, n: int) -> list[str]:
    return [
        str(set_path),
        "--out",
        str(out),
        "--endpoint",
        url + "/v1",
        "--runs",
        "2",
        "--shard",
        f"{k}/{n}",
        *FAST,
    ]


def start_shard(argv: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "solver.cli.main", "eval", *argv],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def test_three_shards_split_the_set_and_one_merge_scores_and_audits_it(tmp_path: Path) -> None:
    set_path = tmp_path / "set.jsonl"
    set_path.write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS))
    out = tmp_path / "shared"
    with FakeEndpoint(slow(olympiad, 0.002)) as fake:
        shards = [start_shard(shard_argv(set_path, out, fake.url, k, 3)) for k in range(3)]
        for proc in shards:
            _, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err[-2000:]
        states = [json.loads((out / "shards" / f"{k}-of-3.json").read_text()) for k in range(3)]
        owned = [{(r["problem"], r["run"]) for r in s["runs"]} for s in states]
        # runs in the evaluation's order (run 1 of P1..P4, then run 2), run i to shard i mod 3
        order = [(p["id"], n) for n in (1, 2) for p in PROBLEMS]
        for k in range(3):
            assert owned[k] == set(order[k::3])
        assert all(r["status"] == "finished" for s in states for r in s["runs"])
        assert not (out / "results.json").exists()  # no shard writes the shared results

        merged = CliRunner().invoke(eval_group, ["merge", str(out), "--json"])
    assert merged.exit_code == 0, merged.output
    last = json.loads(merged.output.splitlines()[-1])
    assert last == {
        "event": "merge.finished",
        "finished": 8,
        "runs": 8,
        "audited": 8,
        "audit_failed": 0,
        "ok": True,
    }
    data = json.loads((out / "results.json").read_text())
    assert [t["rubric"] for t in data["totals"]["per_run"]] == [23, 23]  # 7 + 2 + 7 + 7
    assert data["graders"] == 2


def test_a_dead_shard_is_continued_by_its_own_command_and_merge_waits_for_it(
    tmp_path: Path,
) -> None:
    set_path = tmp_path / "set.jsonl"
    set_path.write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS))
    out = tmp_path / "shared"
    with FakeEndpoint(slow(olympiad, 0.02)) as fake:
        first = CliRunner().invoke(eval_group, shard_argv(set_path, out, fake.url, 0, 2))
        assert first.exit_code == 0, first.output
        args = shard_argv(set_path, out, fake.url, 1, 2)
        mine = [out / p["id"] / f"run-{n}" for n in (1, 2) for p in PROBLEMS][1::2]

        def journal(run_dir: Path) -> bytes:
            path = run_dir / "journal.jsonl"
            return path.read_bytes() if path.is_file() else b""

        def one_done_one_streaming() -> bool:
            # killed while a stream is in flight, as a machine that dies mid-call: a kill
            # between a verifier's call.completed and its report's artifact.put leaves a run
            # that does not resume (a separate bug, reported with this change)
            done = any(b'"type":"run.finished"' in journal(r) for r in mine)
            tails = [journal(r).rstrip(b"\n").rsplit(b"\n", 1)[-1] for r in mine]
            return done and any(b'"type":"net.connect"' in t for t in tails)

        kill_eval_when(args, one_done_one_streaming, "a run of shard 1 to finish")
        before = {
            r: (r / "journal.jsonl").read_bytes() for r in mine if (r / "journal.jsonl").is_file()
        }
        waiting = CliRunner().invoke(eval_group, ["merge", str(out)])
        assert waiting.exit_code == 1
        assert "(shard 1)" in waiting.output and "(shard 0)" not in waiting.output

        again = CliRunner().invoke(eval_group, args)  # the same command, run again
        assert again.exit_code == 0, again.output
    assert again.output.count("already finished") >= 1
    for run_dir, journal in before.items():
        assert (
            (run_dir / "journal.jsonl").read_bytes().startswith(journal[: journal.rfind(b"\n") + 1])
        )
    merged = CliRunner().invoke(eval_group, ["merge", str(out)])
    assert merged.exit_code == 0, merged.output
    assert "merge: 8/8 runs finished; 8/8 audits pass" in merged.output


@pytest.mark.parametrize("spec", ["3/3", "-1/2", "1", "a/b", "0/0", "1/2/3"])
def test_a_bad_shard_is_one_line_exit_2(tmp_path: Path, spec: str) -> None:
    set_path = tmp_path / "set.jsonl"
    set_path.write_text(json.dumps(PROBLEMS[0]) + "\n")
    result = CliRunner().invoke(
        eval_group, [str(set_path), "--out", str(tmp_path / "o"), "--shard", spec]
    )
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error:") and result.output.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_the_split_is_a_partition_whatever_n() -> None:
    jobs = list(range(23))
    for n in (1, 2, 5, 23, 40):
        parts = [shard_jobs(jobs, Shard(k, n)) for k in range(n)]  # type: ignore[arg-type]
        assert sorted(j for part in parts for j in part) == jobs
        assert max(map(len, parts)) - min(map(len, parts)) <= 1


def _eval_argv(command: str, env: dict[str, str]) -> list[str]:
    """The arguments after `solver eval` in a shell command line, its ``$VAR`` and ``${VAR}``
    set from ``env``."""
    words = shlex.split(command)
    saved = dict(os.environ)
    try:
        os.environ.update(env)
        expanded = [os.path.expandvars(w) for w in words]
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert expanded[:2] == ["solver", "eval"], expanded
    return expanded[2:]


def _check_eval_argv(argv: list[str], shard: str) -> None:
    """The arguments parse as a `solver eval` run (the group's default subcommand), with
    exactly this --shard."""
    assert argv[0] not in eval_group.commands  # a SET, so `solver eval` runs `eval run`
    parsed = eval_group.commands["run"].make_context("run", list(argv))
    assert parsed.params["shard_spec"] == shard
    Shard.parse(shard)


def test_the_kubernetes_indexed_job_example_is_valid_and_runs_solver_eval() -> None:
    documents = list(yaml.safe_load_all((DOCS / "eval-indexed-job.yaml").read_text()))
    job = next(d for d in documents if d and d.get("kind") == "Job")
    assert job["apiVersion"] == "batch/v1"
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    n = spec["completions"]
    assert spec["parallelism"] <= n
    container = spec["template"]["spec"]["containers"][0]
    command = container["command"]
    assert command[:2] == ["/bin/sh", "-c"]
    for k in (0, n - 1):
        argv = _eval_argv(command[2], {"JOB_COMPLETION_INDEX": str(k)})
        _check_eval_argv(argv, f"{k}/{n}")
    volumes = {m["mountPath"] for m in container["volumeMounts"]}
    assert any(a.startswith(v) for a in argv for v in volumes if a.startswith("/"))


def test_the_slurm_array_example_is_valid_and_runs_solver_eval() -> None:
    script = (DOCS / "eval-array.sbatch").read_text()
    assert script.startswith("#!/bin/bash\n")
    directives = dict(
        line[len("#SBATCH ") :].split("=", 1)
        for line in script.splitlines()
        if line.startswith("#SBATCH ") and "=" in line
    )
    first, last = directives["--array"].split("%")[0].split("-")
    n = int(last) - int(first) + 1
    assert int(first) == 0
    lines = [ln for ln in script.splitlines() if ln.startswith("solver eval")]
    assert len(lines) == 1
    shards = next(ln for ln in script.splitlines() if ln.startswith("SHARDS="))
    assert shards == f"SHARDS={n}"
    for k in (0, n - 1):
        argv = _eval_argv(
            lines[0],
            {
                "SLURM_ARRAY_TASK_ID": str(k),
                "SHARDS": str(n),
                "OUT": "/shared/evals/imo",
                "SET": "/shared/sets/imo.jsonl",
                "ENDPOINT": "http://gateway:8000/v1",
            },
        )
        _check_eval_argv(argv, f"{k}/{n}")
    subprocess.run(["bash", "-n", str(DOCS / "eval-array.sbatch")], check=True)
