"""A run directory written before the one-package redesign still audits, resumes and reports.

``tests/fixtures/run-v1-signed`` is a finished, signed run made by the code of the previous
layout (``solver/audit.py``, top-level ``roles/`` and ``prompts/``); its public key lies beside
it. The run-directory format did not change, so the new code must read it as it did then.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from solver.audit import audit_run
from solver.report import load_report
from solver.run import run_status
from tests.loop.harness import resume

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "run-v1-signed"
PUBLIC_KEY = FIXTURE.with_name("run-v1-signed.pub")


@pytest.fixture
def old_run(tmp_path: Path) -> Path:
    copy = tmp_path / "runs" / FIXTURE.name
    shutil.copytree(FIXTURE, copy)
    return copy


def _digests(run_dir: Path) -> dict[str, str]:
    return {
        path.relative_to(run_dir).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(run_dir.rglob("*"))
        if path.is_file() and path.name != ".lock"
    }


def test_old_run_audits_clean_with_its_key(old_run: Path) -> None:
    report = audit_run(old_run, public_key=PUBLIC_KEY)
    failing = [check for check in report.checks if check.status == "fail"]
    assert report.ok, failing
    names = {check.name for check in report.checks}
    assert {"manifest", "chain", "seals", "attestation", "calls", "prompts", "isolation"} <= names
    assert {check.status for check in report.checks if check.name == "prompts"} == {"pass"}


def test_old_run_resumes_without_changing_anything(old_run: Path, tmp_path: Path) -> None:
    before = _digests(old_run)
    outcome = resume(old_run, tmp_path)
    assert outcome.outcome == "solved"
    assert _digests(old_run) == before


def test_old_run_reports_and_has_a_status(old_run: Path) -> None:
    report = load_report(old_run)
    assert report.outcome == "solved"
    assert report.problem["id"] == "odd-squares"
    assert run_status(old_run)["state"] == "finished"
