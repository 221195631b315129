"""The hostile-input catalogue (issue 15): every numbered finding and the class of input it
stands for, with the input and the exit code or behaviour expected.

Each :class:`Case` builds its input in a fresh directory and checks the outcome itself;
``test_catalogue.py`` runs them all. ``item`` is the finding's number in the issue, ``klass``
the family of inputs it represents. docs/hostile.md gives the count.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from solver.audit import audit_run
from solver.store import RunReader, RunStore
from tests.hostile.helpers import Outcome, copy_run, run_cli, tree_snapshot
from tests.loop.harness import PROBLEM


@dataclass
class Ctx:
    tmp: Path
    finished: Path  # a finished run, shared: copy it before damaging it
    outside: Path  # files outside any run

    def run_copy(self, name: str = "run") -> Path:
        return copy_run(self.finished, self.tmp / name)

    def write(self, name: str, text: str | bytes) -> Path:
        path = self.tmp / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        return path


@dataclass(frozen=True)
class Case:
    name: str
    item: str
    klass: str
    expect: str
    check: Callable[[Ctx], None]


CASES: list[Case] = []


def case(name: str, item: str, klass: str, expect: str) -> Callable[[Callable[[Ctx], None]], None]:
    def register(check: Callable[[Ctx], None]) -> None:
        CASES.append(Case(name, item, klass, expect, check))

    return register


def expect_code(outcome: Outcome, code: int, *needles: str) -> None:
    assert outcome.code == code, (outcome.code, outcome.stderr)
    for needle in needles:
        assert needle in outcome.stderr, outcome.stderr


def front_matter(body: str) -> str:
    return f"---\n{body}\n---\nProve that 1 + 1 = 2.\n"


def no_runs_under(root: Path) -> None:
    runs = root / "runs"
    assert not runs.exists() or not any(runs.iterdir()), list(runs.iterdir())


def closed_port_config(ctx: Ctx, extra: str = "") -> Path:
    """A config whose endpoint refuses at once (nothing listens on port 9 of loopback)."""
    return ctx.write(
        "solver.toml",
        f'runs_dir = "{ctx.tmp / "runs"}"\n[retry]\nendpoint_wait_s = 0\n{extra}',
    )


# ------------------------------------------------------------------ 1, 3, 11: secrets, URLs


@case("argv-url-credentials", "1", "secrets in stored text", "masked in the stored argv")
def _argv(ctx: Ctx) -> None:
    from solver._util.masking import mask_argv

    argv = ["solve", "p.md", "--endpoint", "http://u:pw-9f8e7d@127.0.0.1:9/v1?token=T0K3N"]
    stored = " ".join(mask_argv(argv))
    assert "pw-9f8e7d" not in stored and "T0K3N" not in stored
    assert "127.0.0.1:9/v1?token=***" in stored
    assert mask_argv(["--api-key", "sk-abc", "--token=xyz"]) == ["--api-key", "***", "--token=***"]


@case("fragment-of-key", "3", "key echoed cut short", "every 8+ character fragment masked")
def _fragment(ctx: Ctx) -> None:
    from solver.wire.errors import redact

    key = "sk-live-0123456789abcdef"
    for echoed in (key[:-3], key[4:], key[5:17], f"x{key[:8]}y"):
        shown = redact(f"401: bad key {echoed} given", key)
        assert echoed not in shown and "***" in shown, shown
    assert redact("a short sk-l echo", key) == "a short sk-l echo"


@case("fragment-in-cli-error", "3", "key echoed cut short", "the error line masks it")
def _cli_fragment(ctx: Ctx) -> None:
    key = "sk-live-0123456789abcdef"
    problem = ctx.write("p.md", front_matter(f"{key[:-3]}: 1"))
    outcome = run_cli(
        ["solve", str(problem), "--endpoint", "http://127.0.0.1:9/v1"],
        env={"SOLVER_API_KEY": key},
    )
    expect_code(outcome, 2, "unknown front-matter key")
    assert key[:-3] not in outcome.stderr


@case("query-endpoint-url", "11", "URL joins", "the query stays at the end of each URL")
def _query(ctx: Ctx) -> None:
    from solver.llm import Endpoint

    endpoint = Endpoint("http://127.0.0.1:9/v1?x=1", "chat", "m")
    assert endpoint.url_for("/chat/completions") == "http://127.0.0.1:9/v1/chat/completions?x=1"
    assert endpoint.url_for("/props", versioned=False) == "http://127.0.0.1:9/props?x=1"
    assert Endpoint("http://h/api/v4/", "chat", "m").url_for("/models") == "http://h/api/v4/models"


# ------------------------------------------------------------------ 8: URLs and config


@case("ftp-endpoint", "8", "unsupported URL scheme", "exit 2 at once, no run directory")
def _ftp(ctx: Ctx) -> None:
    problem = ctx.write("p.md", PROBLEM)
    config = closed_port_config(ctx)
    for url in ("ftp://127.0.0.1/v1", "file:///etc/passwd", "127.0.0.1:8000/v1", "javascript:x"):
        outcome = run_cli(["solve", str(problem), "--config", str(config), "--endpoint", url])
        expect_code(outcome, 2, "endpoint")
    no_runs_under(ctx.tmp)


@case("unparsable-endpoint", "8", "malformed URL", "exit 2, one line, no ValueError")
def _bracket(ctx: Ctx) -> None:
    problem = ctx.write("p.md", PROBLEM)
    config = closed_port_config(ctx)
    for url in ("http://[::1", "http://127.0.0.1:99999/v1", "http:///v1", "http://a b/v1"):
        outcome = run_cli(["solve", str(problem), "--config", str(config), "--endpoint", url])
        expect_code(outcome, 2)
    no_runs_under(ctx.tmp)


@case("endpoint-secret-in-error", "1", "secrets in shown text", "a refused URL is shown masked")
def _secret_refused(ctx: Ctx) -> None:
    problem = ctx.write("p.md", PROBLEM)
    outcome = run_cli(["solve", str(problem), "--endpoint", "ftp://user:hunter2pass@h/?k=SEKRET"])
    expect_code(outcome, 2)
    assert "hunter2pass" not in outcome.stderr and "SEKRET" not in outcome.stderr


@case("infinite-timeout", "8", "non-finite numbers", "exit 2, no orphan run directory")
def _inf(ctx: Ctx) -> None:
    problem = ctx.write("p.md", PROBLEM)
    for value in ("inf", "nan", "-inf"):
        config = closed_port_config(ctx, f"[timeouts]\nconnect_s = {value}\n")
        outcome = run_cli(
            ["solve", str(problem), "--config", str(config), "--endpoint", "http://127.0.0.1:9/v1"]
        )
        expect_code(outcome, 2, "connect_s")
    no_runs_under(ctx.tmp)


@case("config-symlink-loop", "8", "config file that is no file", "exit 2, one line")
def _config_loop(ctx: Ctx) -> None:
    loop = ctx.tmp / "loop.toml"
    loop.symlink_to(loop)
    os.mkfifo(ctx.tmp / "fifo.toml")
    (ctx.tmp / "dir.toml").mkdir()
    for path in (loop, ctx.tmp / "fifo.toml", ctx.tmp / "dir.toml", ctx.tmp / "absent.toml"):
        expect_code(run_cli(["config", "show", "--config", str(path)]), 2, str(path))


@case("config-deep-and-huge", "8", "parser limits (TOML)", "exit 2 for nesting and long ints")
def _config_deep(ctx: Ctx) -> None:
    deep = ctx.write("deep.toml", "a = " + "[" * 50_000 + "]" * 50_000 + "\n")
    digits = ctx.write("digits.toml", "seed = " + "9" * 5000 + "\n")
    big = ctx.write("big.toml", "# " + "x" * (2 << 20) + "\n")
    for path in (deep, digits, big):
        expect_code(run_cli(["config", "show", "--config", str(path)]), 2, str(path))


# ------------------------------------------------------------------ 7, 8: problem files


@case("yaml-alias-bomb", "7", "parser limits (YAML aliases)", "exit 2 at once, short message")
def _bomb(ctx: Ctx) -> None:
    levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for n in range(1, 9):
        prev = chr(ord("a") + n - 1)
        name = chr(ord("a") + n)
        levels.append(f"{name}: &{name} [{','.join(['*' + prev] * 9)}]")
    levels.append("title: *i")
    problem = ctx.write("bomb.md", front_matter("\n".join(levels)))
    outcome = run_cli(["problem", "show", str(problem)])
    expect_code(outcome, 2, "aliases are not allowed")


@case("yaml-deep", "8", "parser limits (YAML depth)", "exit 2, no RecursionError")
def _yaml_deep(ctx: Ctx) -> None:
    problem = ctx.write("deep.md", front_matter("title: " + "[" * 50_000 + "]" * 50_000))
    expect_code(run_cli(["problem", "show", str(problem)]), 2, "nested deeper")


@case("yaml-bad-date", "8", "values YAML converts", "exit 2 naming the file")
def _date(ctx: Ctx) -> None:
    for body in ("title: 2025-13-45", "source: 2025-02-30", "points: " + "9" * 5000):
        problem = ctx.write("date.md", front_matter(body))
        expect_code(run_cli(["problem", "show", str(problem)]), 2, "date.md")


@case("yaml-python-tag", "8", "unsafe YAML", "exit 2, nothing constructed")
def _tag(ctx: Ctx) -> None:
    problem = ctx.write("tag.md", front_matter("title: !!python/object/apply:os.system ['true']"))
    expect_code(run_cli(["problem", "show", str(problem)]), 2, "front matter")


@case("problem-special-files", "8", "problem path that is no file", "exit 2, no hang")
def _special(ctx: Ctx) -> None:
    os.mkfifo(ctx.tmp / "fifo.md")
    (ctx.tmp / "dir.md").mkdir()
    loop = ctx.tmp / "loop.md"
    loop.symlink_to(loop)
    for name in ("fifo.md", "dir.md", "loop.md", "missing.md"):
        expect_code(run_cli(["problem", "show", str(ctx.tmp / name)]), 2, name)


@case("problem-escape-sequences", "10", "terminal escapes in text", "shown as \\x1b, not sent")
def _escapes(ctx: Ctx) -> None:
    osc52 = "\x1b]52;c;ZWNobyBwd25lZA==\x1b\\"  # clipboard write, ST-terminated
    clear = "\x1b[2J\x9b31m\u202e"  # screen clear, C1 CSI, right-to-left override
    title = 'title: "\\e]0;owned\\e\\\\"'  # YAML's \e escape: a window title
    problem = ctx.write("esc.md", front_matter(title) + "Prove it. " + osc52 + clear + "\n")
    outcome = run_cli(["problem", "show", str(problem)])
    expect_code(outcome, 0)
    for raw in ("\x1b", "\x9b", "\u202e"):
        assert raw not in outcome.stdout, outcome.stdout
    assert "\\x1b]52;c;" in outcome.stdout and "\\x1b]0;owned" in outcome.stdout
    shown = run_cli(["problem", "show", "--json", str(problem)]).stdout
    assert "\x1b" not in shown and "\x9b" not in shown
    assert "Prove it. \x1b]52" in json.loads(shown)["statement"]  # the same value, escaped


# ------------------------------------------------------------------ 8: problem sets


@case("set-huge-integer", "8", "parser limits (JSON numbers)", "exit 2")
def _set_int(ctx: Ctx) -> None:
    path = ctx.write("set.json", '[{"problem": "x", "points": ' + "9" * 5000 + "}]")
    expect_code(run_cli(["problem", "set-info", str(path)]), 2, "set.json")
    path = ctx.write("set.jsonl", '{"problem": "x", "n": ' + "9" * 5000 + "}\n")
    expect_code(run_cli(["problem", "set-info", str(path)]), 2, "set.jsonl")


@case("calibrate-huge-integer", "8", "parser limits (JSON numbers)", "exit 2")
def _calibrate_int(ctx: Ctx) -> None:
    path = ctx.write("graded.jsonl", '{"id": "a", "score": ' + "9" * 5000 + "}\n")
    expect_code(run_cli(["eval", "calibrate", str(path)]), 2, "graded.jsonl: line 1: not JSON")
    path = ctx.write("deep.jsonl", '{"a":' * 100_000 + "1" + "}" * 100_000 + "\n")
    expect_code(run_cli(["eval", "calibrate", str(path)]), 2, "nested too deeply")


@case("telemetry-not-a-database", "8", "a file of the wrong kind", "exit 2, no uvicorn traceback")
def _telemetry_file(ctx: Ctx) -> None:
    path = ctx.write("telemetry.sqlite", "not a database, just text\n")
    argv = ["proxy", "--upstream", "http://127.0.0.1:9/v1", "--port", "0", "--telemetry", str(path)]
    expect_code(run_cli(argv), 2, "not a usable telemetry database")
    assert path.read_text() == "not a database, just text\n"  # nothing already there changed


@case("set-deep-json", "8", "parser limits (JSON depth)", "exit 2, no RecursionError")
def _set_deep(ctx: Ctx) -> None:
    path = ctx.write("deep.json", "[" * 50_000 + "]" * 50_000)
    expect_code(run_cli(["problem", "set-info", str(path)]), 2, "nested too deeply")


@case("set-lone-surrogate", "8", "text that is no text", "exit 2 (statement or extra column)")
def _surrogate(ctx: Ctx) -> None:
    path = ctx.write("s.jsonl", '{"problem": "x\\ud800", "id": "a"}\n')
    expect_code(run_cli(["problem", "set-info", str(path)]), 2, "lone surrogate")
    path = ctx.write("t.jsonl", '{"problem": "x", "category": "\\udfff"}\n')
    expect_code(run_cli(["problem", "set-info", str(path)]), 2, "lone surrogate")


# ------------------------------------------------------------------ 4, 5: run directory entries


@case("lock-symlink", "4", "symlinks planted in a run", "resume exit 65, target untouched")
def _lock_link(ctx: Ctx) -> None:
    run = ctx.run_copy()
    (run / ".lock").symlink_to(ctx.outside / "precious.txt")
    before = tree_snapshot(ctx.outside)
    outcome = run_cli(["resume", str(run)])
    expect_code(outcome, 65, ".lock", "symbolic link")
    assert tree_snapshot(ctx.outside) == before
    assert (ctx.outside / "precious.txt").read_text() == "must survive\n"


@case("final-dir-symlink", "4", "symlinks planted in a run", "exit 65, outside .tmp files kept")
def _final_link(ctx: Ctx) -> None:
    run = ctx.run_copy()
    shutil.rmtree(run / "final")
    (run / "final").symlink_to(ctx.outside, target_is_directory=True)
    before = tree_snapshot(ctx.outside)
    expect_code(run_cli(["resume", str(run)]), 65, "final", "symbolic link")
    assert tree_snapshot(ctx.outside) == before


@case("journal-symlink", "4", "symlinks planted in a run", "every verb exit 65")
def _journal_link(ctx: Ctx) -> None:
    run = ctx.run_copy()
    real = ctx.outside / "journal.jsonl"
    shutil.move(run / "journal.jsonl", real)
    (run / "journal.jsonl").symlink_to(real)
    before = tree_snapshot(ctx.outside)
    for verb in ("status", "report", "audit", "resume"):
        expect_code(run_cli([verb, str(run)]), 65, "journal.jsonl")
    assert tree_snapshot(ctx.outside) == before


@case("eval-proofs-run-symlink", "4", "symlinks planted in a run", "not followed, exit 2")
def _eval_proofs_link(ctx: Ctx) -> None:
    evaluation = ctx.tmp / "evals"
    (evaluation / "item").mkdir(parents=True)
    (evaluation / "item" / "run-1").symlink_to(ctx.finished, target_is_directory=True)
    (evaluation / "EVAL.json").write_text(json.dumps({"dirs": {"item": "item"}}))
    out = ctx.tmp / "proofs.jsonl"
    expect_code(run_cli(["eval", "proofs", str(evaluation), "--out", str(out)]), 2, "0 run(s)")
    assert not out.exists()


@case("fifo-entries", "5", "special files in a run", "audit/status/report/resume exit 65, no hang")
def _fifos(ctx: Ctx) -> None:
    for name in ("journal.jsonl", "MANIFEST.json", ".lock", "blob"):
        run = ctx.run_copy(f"run-{name}")
        target = run / name
        if name == "blob":
            target = sorted((run / "blobs" / "sha256").rglob("*"))[-1]
        if target.exists():
            target.unlink()
        os.mkfifo(target)
        for verb in ("audit", "status", "report", "resume"):
            outcome = run_cli([verb, str(run)])
            # 0 when the verb never reads that entry (status reads no blob, audit no lock)
            assert outcome.code in (0, 6, 65), (name, verb, outcome)
            reader = "status" if name == ".lock" else "audit"
            if verb == reader:
                assert outcome.code == 65, (name, verb, outcome)
            if outcome.code == 65:
                assert "not a regular file" in outcome.stderr, outcome.stderr


@case("blob-to-dev-zero", "5", "endless files", "audit exit 65 without reading")
def _dev_zero(ctx: Ctx) -> None:
    run = ctx.run_copy()
    blob = sorted((run / "blobs" / "sha256").rglob("*"))[-1]
    blob.unlink()
    blob.symlink_to("/dev/zero")
    expect_code(run_cli(["audit", str(run)]), 65, "symbolic link")
    # the report reads only the blobs it shows: either it does not touch this one or refuses
    assert run_cli(["report", str(run), "--json"]).code in (0, 65)


@case("oversized-blob", "5", "files over their bound", "refused as corrupt, not read whole")
def _oversized(ctx: Ctx) -> None:
    run = ctx.run_copy()
    reader = RunReader(run)
    statement = next(r for r in reader.records() if r.type == "artifact.put")
    link = statement.data["blob"]
    path = reader.blobs.path_for(link["blob"])
    with path.open("ab") as handle:
        handle.write(b"x" * 4096)
    from solver.store import BlobCorrupt, BlobRef

    try:
        reader.read_blob(BlobRef(link["blob"], link["bytes"]))
    except BlobCorrupt:
        pass
    else:
        raise AssertionError("an oversized blob was read")
    assert run_cli(["audit", str(run)]).code == 4


# ------------------------------------------------------------------ 6: names that leave the run


def _forge_final(ctx: Ctx, names: dict[str, str]) -> Path:
    from tests.loop.forge import rewrite

    def edit(store: RunStore, kind: str, data: dict[str, object]) -> dict[str, object]:
        if kind == "run.finished":
            final = dict(data["final"])  # type: ignore[call-overload]
            link = next(iter(final.values()))
            for name in names:
                final[name] = link
            data["final"] = final
        return data

    return rewrite(ctx.finished, ctx.tmp / "forged", edit)


@case("eval-proofs-name-escapes", "6", "names that leave the run", "exit 2, nothing read")
def _eval_proofs_escape(ctx: Ctx) -> None:
    evaluation = ctx.tmp / "evals"
    evaluation.mkdir()
    copy_run(ctx.finished, ctx.tmp / "elsewhere" / "run-1")
    for name in ("../elsewhere", "/etc", "a/../../elsewhere", ["elsewhere"]):
        (evaluation / "EVAL.json").write_text(json.dumps({"dirs": {"item": name}}))
        out = ctx.tmp / "proofs.jsonl"
        outcome = run_cli(["eval", "proofs", str(evaluation), "--out", str(out)])
        expect_code(outcome, 2, "is not a directory name of this evaluation")
        assert not out.exists()


@case("final-name-escapes", "6", "names that leave the run", "audit fails, never hashes it")
def _final_escape(ctx: Ctx) -> None:
    secret = ctx.outside / "precious.txt"
    run = _forge_final(ctx, {f"../../../../..{secret}": "", "/etc/passwd": "", "a/../../x": ""})
    report = audit_run(run)
    failing = [c for c in report.checks if c.name == "final" and c.status == "fail"]
    assert len(failing) == 3, report.checks
    outcome = run_cli(["audit", str(run), "--json"])
    assert outcome.code == 4
    import hashlib

    digest = hashlib.sha256(secret.read_bytes()).hexdigest()
    assert digest not in outcome.stdout and "12 bytes" not in outcome.stdout


@case("journal-deep-line", "8", "parser limits (journal)", "status/report/resume 65, audit 4")
def _deep_journal(ctx: Ctx) -> None:
    run = ctx.run_copy()
    with (run / "journal.jsonl").open("ab") as handle:
        handle.write(b"[" * 100_000 + b"]" * 100_000 + b"\n")
        handle.write(b'{"data":{},"prev":"x","seq":999,"sess":1,"t":"","type":"x","v":1}\n')
    for verb in ("status", "report", "resume"):
        expect_code(run_cli([verb, str(run)]), 65)
    expect_code(run_cli(["audit", str(run)]), 4)


@case("manifest-damaged-chained", "8", "damaged runs with a valid chain", "resume exit 65")
def _damaged_manifest(ctx: Ctx) -> None:
    from tests.loop.forge import rewrite

    def strip(manifest: dict[str, object]) -> dict[str, object]:
        problem = dict(manifest["problem"])  # type: ignore[call-overload]
        problem["record"] = {"id": 5}
        manifest["problem"] = problem
        return manifest

    def reopen(store: RunStore, kind: str, data: dict[str, object]) -> dict[str, object] | None:
        return None if kind in ("run.finished", "decision") else data

    run = rewrite(ctx.finished, ctx.tmp / "forged", reopen, manifest=strip)
    (run / "final").exists() and shutil.rmtree(run / "final")
    outcome = run_cli(["resume", str(run), "--endpoint", "http://127.0.0.1:9/v1"])
    expect_code(outcome, 65, "MANIFEST.json")


# ------------------------------------------------------------------ 10: reports


@case("report-into-run", "10", "output paths inside a run", "exit 2, the run unchanged")
def _report_into_run(ctx: Ctx) -> None:
    run = ctx.run_copy()
    before = tree_snapshot(run)
    for flag, target in (("--html", "journal.jsonl"), ("--md", "final/proof.md"), ("--md", "x.md")):
        expect_code(run_cli(["report", str(run), flag, str(run / target)]), 2, "inside the run")
    assert tree_snapshot(run) == before


@case("report-markdown-html", "10", "raw HTML in model text", "escaped in the Markdown report")
def _md_html(ctx: Ctx) -> None:
    from tests.loop.forge import rewrite

    def inject(store: RunStore, kind: str, data: dict[str, object]) -> dict[str, object]:
        return data

    def title(manifest: dict[str, object]) -> dict[str, object]:
        problem = dict(manifest["problem"])  # type: ignore[call-overload]
        record = dict(problem["record"])
        record["title"] = '<script>alert(1)</script><img src=x onerror="alert(2)">\x1b]0;t\x07'
        problem["record"] = record
        manifest["problem"] = problem
        return manifest

    run = rewrite(ctx.finished, ctx.tmp / "forged", inject, manifest=title)
    outcome = run_cli(["report", str(run)])
    assert outcome.code == 0, outcome.stderr
    assert "<script" not in outcome.stdout and "<img" not in outcome.stdout
    assert "&lt;script>" in outcome.stdout and "\x1b" not in outcome.stdout


@case("report-full-disk", "10", "a full disk while writing", "exit 74, the old report kept")
def _full_disk(ctx: Ctx) -> None:
    import errno
    from unittest import mock

    run = ctx.run_copy()
    old = ctx.write("report.md", "the old report\n")

    def full(fd: int, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with mock.patch("solver._util.fs.write_all", full):
        expect_code(run_cli(["report", str(run), "--md", str(old)]), 74, "disk full")
    assert old.read_text() == "the old report\n"
    assert sorted(p.name for p in ctx.tmp.iterdir() if p.name.endswith(".tmp")) == []
