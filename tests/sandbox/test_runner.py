"""The sandbox runs Python and reports what happened, in a typed record."""

from __future__ import annotations

import json

import pytest

from solver.errors import EXIT_SANDBOX, SandboxUnavailable
from solver.sandbox import Limits, SandboxVersion, run_python
from solver.sandbox.command import bwrap_argv


def test_a_program_runs_with_sympy_and_its_exit_is_its_own(sandbox_ready: SandboxVersion) -> None:
    result = run_python(
        "import sympy, sys\nprint(sympy.factorint(2**32 + 1))\nprint('oops', file=sys.stderr)\n"
        "sys.exit(3)\n"
    )
    assert result.stdout.text == "{641: 1, 6700417: 1}\n"
    assert result.stderr.text == "oops\n"
    assert result.exit == 3
    assert not result.timed_out and result.killed_reason is None
    assert result.cpu_s is not None and result.wall_s > 0
    assert result.sandbox == sandbox_ready.as_dict()
    assert result.sandbox["bubblewrap"].startswith("bubblewrap ")
    assert result.sandbox["sympy"]


def test_a_traceback_is_the_programs_stderr_and_exit_1(sandbox_ready: SandboxVersion) -> None:
    result = run_python("1 / 0\n")
    assert result.exit == 1
    assert "ZeroDivisionError" in result.stderr.text
    assert 'File "/sandbox/main.py", line 1' in result.stderr.text


def test_output_beyond_the_bound_is_cut_and_says_so(sandbox_ready: SandboxVersion) -> None:
    result = run_python("print('x' * 5000)", Limits(output_bytes=1000))
    assert result.stdout.kept == b"x" * 1000
    assert result.stdout.total_bytes == 5001
    assert result.stdout.truncated
    assert result.stdout.text.endswith("[output truncated: 5001 bytes, the first 1000 kept]")
    record = result.as_json()
    assert record["stdout_truncated"] is True and record["stdout_bytes"] == 5001
    json.dumps(record)  # the record is JSON as it stands


def test_the_environment_is_clean_and_hashing_is_fixed(sandbox_ready: SandboxVersion) -> None:
    result = run_python("import os\nprint(sorted(os.environ))\nprint(hash('abc'))\n")
    names, first_hash = result.stdout.text.splitlines()
    assert names == "['HOME', 'LANG', 'PATH', 'PWD', 'PYTHONDONTWRITEBYTECODE', 'PYTHONHASHSEED']"
    again = run_python("print(hash('abc'))\n")
    assert again.stdout.text.strip() == first_hash  # the audit's re-run sees the same order


def test_the_limits_are_those_asked_inside(sandbox_ready: SandboxVersion) -> None:
    limits = Limits(cpu_s=7, memory_mb=512, file_mb=3, processes=9)
    result = run_python(
        "import resource as r\n"
        "for name in ('RLIMIT_CPU', 'RLIMIT_AS', 'RLIMIT_FSIZE', 'RLIMIT_NPROC', 'RLIMIT_CORE'):\n"
        "    print(*r.getrlimit(getattr(r, name)))\n",
        limits,
    )
    assert result.stdout.text.splitlines() == [
        "7 8",
        f"{512 * 1024 * 1024} {512 * 1024 * 1024}",
        f"{3 * 1024 * 1024} {3 * 1024 * 1024}",
        "9 9",
        "0 0",
    ]
    assert result.limits == limits


def test_without_bubblewrap_nothing_runs_and_the_error_names_the_install_step() -> None:
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap") as raised:
        run_python("print(1)", bwrap="/nonexistent/bwrap")
    assert raised.value.exit_code == EXIT_SANDBOX


def test_a_bubblewrap_that_cannot_start_is_an_error_not_a_fallback() -> None:
    # `false` is found and exits 1 at once, as bubblewrap does without user namespaces
    with pytest.raises(SandboxUnavailable, match="install bubblewrap"):
        run_python("print(1)", bwrap="false")


def test_the_command_line_isolates_everything() -> None:
    argv = bwrap_argv("bwrap", "/usr/bin/python3", Limits(), program_fd=5, status_fd=6)
    for option in (
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--as-pid-1",
    ):
        assert option in argv
    assert "--share-net" not in argv
    # only /usr comes from the host, read-only
    binds = [argv[i + 1] for i, word in enumerate(argv) if "bind" in word and "data" not in word]
    assert binds == ["/usr"]
    assert argv[argv.index("--ro-bind") + 1 : argv.index("--ro-bind") + 3] == ["/usr", "/usr"]
