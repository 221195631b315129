"""Issue 41, point 7: a run made by an earlier version, interrupted, then resumed by today's
code, passes `solver audit` afterwards. One fixture per released journal format (see
tests/fixtures/README.md for how each was made); each copy is resumed against the fake
endpoint, audited, and its new session's templates checked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from solver.audit import audit_run
from solver.roles.templates import template_digests
from solver.store import RunReader
from solver.testing import FakeEndpoint
from tests.hostile.helpers import run_cli
from tests.loop import scripts
from tests.loop.forge import rewrite

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
INTERRUPTED = ["run-v1-interrupted", "run-v2-interrupted", "run-v2-later-interrupted"]


def copy_of(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(FIXTURES / name, target)
    return target


@pytest.mark.parametrize("name", INTERRUPTED)
def test_an_old_interrupted_run_resumes_and_audits_clean(name: str, tmp_path: Path) -> None:
    run_dir = copy_of(name, tmp_path)
    before = audit_run(run_dir)
    assert before.ok, [c for c in before.checks if c.status == "fail"]
    with FakeEndpoint(scripts.solved) as fake:
        outcome = run_cli(["resume", str(run_dir), "--endpoint", fake.url + "/v1", "--json"])
    assert outcome.code == 0, outcome.stderr
    finished = json.loads(outcome.stdout.splitlines()[-1])
    assert finished["event"] == "run.finished" and finished["outcome"] == "solved"
    after = audit_run(run_dir)
    assert after.ok, [(c.detail, c.where) for c in after.checks if c.status == "fail"]
    assert not [
        c for c in after.checks if c.name in ("prompts", "references") and c.status != "pass"
    ]


@pytest.mark.parametrize("name", INTERRUPTED)
def test_the_resuming_session_names_the_templates_the_manifest_does_not(
    name: str, tmp_path: Path
) -> None:
    run_dir = copy_of(name, tmp_path)
    manifest = json.loads((run_dir / "MANIFEST.json").read_text())["templates"]
    with FakeEndpoint(scripts.solved) as fake:
        assert run_cli(["resume", str(run_dir), "--endpoint", fake.url + "/v1"]).code == 0
    (resumed,) = [
        r for r in RunReader(run_dir).records() if r.type == "session.started" and r.seq > 0
    ][-1:]
    brought = resumed.data.get("templates", {})
    changed = {n: d for n, d in template_digests().items() if manifest.get(n) != d}
    assert brought == changed
    for digest in brought.values():
        hexdigest = digest.removeprefix("sha256:")
        assert (run_dir / "blobs" / "sha256" / hexdigest[:2] / hexdigest).is_file()


def test_a_template_no_session_named_still_fails_the_audit(tmp_path: Path) -> None:
    """The rule is not loosened: a context built with a template neither the manifest nor
    an earlier session names fails, as before."""
    run_dir = copy_of("run-v2-interrupted", tmp_path)
    with FakeEndpoint(scripts.solved) as fake:
        assert run_cli(["resume", str(run_dir), "--endpoint", fake.url + "/v1"]).code == 0
    assert audit_run(run_dir).ok

    def drop_templates(store: object, kind: str, data: dict[str, object]) -> dict[str, object]:
        if kind == "session.started":
            data.pop("templates", None)
        return data

    forged = rewrite(run_dir, tmp_path / "forged", drop_templates)
    report = audit_run(forged)
    assert not report.ok
    assert any(
        c.name == "prompts"
        and "is not the one the manifest or an earlier session names" in c.detail
        for c in report.checks
    )
