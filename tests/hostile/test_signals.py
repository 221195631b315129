"""Issue 15, finding 8 (last case): SIGTERM while `solver solve` is still importing its
verb exits 130 with one line, like Ctrl-C, never 143 and never a traceback. The signal is
sent from inside the import, so the test does not depend on timing."""

from __future__ import annotations

import importlib
import os
import signal
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

from solver.cli.main import main


def test_a_sigterm_during_the_verbs_import_is_an_interruption(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_import = importlib.import_module

    def import_then_terminate(name: str, package: str | None = None) -> ModuleType:
        module = real_import(name, package)
        if name == "solver.cli.run":
            # without a handler the signal would end pytest itself: fail instead
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL, "no SIGTERM handler"
            os.kill(os.getpid(), signal.SIGTERM)
        return module

    monkeypatch.setattr(importlib, "import_module", import_then_terminate)
    problem = tmp_path / "p.md"
    problem.write_text("Prove that 1 = 1.\n")
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        result = CliRunner().invoke(main, ["solve", str(problem)], catch_exceptions=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert result.exit_code == 130, (result.exit_code, result.output)
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == ["interrupted; nothing was started"]
    assert not (tmp_path / "runs").exists()
