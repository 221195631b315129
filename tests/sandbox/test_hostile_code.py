"""Hostile code in the sandbox (issue 43, point 5): each attack is contained, the orchestrator
is unharmed, and each ends in a recorded result."""

from __future__ import annotations

import socket
import threading
import time
import tracemalloc
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from solver.sandbox import Execution, Limits, SandboxVersion, run_python
from tests.sandbox.helpers import survivors


def _lines(result: Execution) -> list[str]:
    assert result.stderr.text == "", result.stderr.text
    return result.stdout.text.splitlines()


@pytest.fixture
def listener() -> Iterator[tuple[int, list[socket.socket]]]:
    """A real TCP listener on the host's 127.0.0.1, recording every connection it accepts."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], accepted
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()
        for conn in accepted:
            conn.close()


CONNECT = """
import socket
for host, port in {targets!r}:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect((host, port))
        print(host, "connected")
    except OSError as exc:
        print(host, type(exc).__name__, exc.errno)
"""


def test_the_hosts_loopback_is_unreachable(
    sandbox_ready: SandboxVersion, listener: tuple[int, list[socket.socket]]
) -> None:
    port, accepted = listener
    # the listener works from the host
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    deadline = time.monotonic() + 5
    while not accepted and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(accepted) == 1
    result = run_python(CONNECT.format(targets=[("127.0.0.1", port), ("localhost", port)]))
    # the sandbox's own loopback: nothing listens there, and the host's is another network
    assert _lines(result)[0] == "127.0.0.1 ConnectionRefusedError 111"
    assert "connected" not in result.stdout.text
    assert len(accepted) == 1  # nothing more reached the host's listener
    assert result.exit == 0


def test_no_address_outside_is_reachable(sandbox_ready: SandboxVersion) -> None:
    # 192.0.2.1 and 2001:db8::1 are documentation addresses (RFC 5737, 3849): the sandbox
    # has no route at all, so nothing is sent anywhere
    code = CONNECT.format(targets=[("192.0.2.1", 80), ("10.0.0.1", 443)]) + (
        "s6 = socket.socket(socket.AF_INET6)\n"
        "try:\n"
        "    s6.connect(('2001:db8::1', 80))\n"
        "except OSError as exc:\n"
        "    print('v6', type(exc).__name__)\n"
        "import os\n"
        "print(sorted(os.listdir('/sys/class/net')) if os.path.exists('/sys/class/net') else"
        " 'no sysfs')\n"
        "try:\n"
        "    socket.getaddrinfo('example.com', 80)\n"
        "except OSError as exc:\n"
        "    print('dns', type(exc).__name__)\n"
    )
    lines = _lines(run_python(code))
    assert lines[0] == "192.0.2.1 OSError 101"  # ENETUNREACH
    assert lines[1] == "10.0.0.1 OSError 101"
    assert lines[2] == "v6 OSError"
    assert lines[3] == "no sysfs"
    assert lines[4] == "dns gaierror"


def test_secrets_of_the_host_are_absent(
    sandbox_ready: SandboxVersion, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "runs" / "a-run"
    run_dir.mkdir(parents=True)
    (run_dir / "journal.jsonl").write_text("secret journal\n")
    key = "sk-test-" + uuid.uuid4().hex
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("SOLVER_API_KEY", key)
    code = f"""
import os
for path in ["/etc/shadow", "/etc/passwd", os.path.expanduser("~/.ssh/id_rsa"),
             "/root/.ssh/id_rsa", {str(Path.home() / ".ssh" / "id_rsa")!r},
             {str(run_dir / "journal.jsonl")!r}, "/proc/1/root/etc/shadow"]:
    try:
        open(path).read()
        print(path, "READ")
    except OSError as exc:
        print(type(exc).__name__)
print(sorted(os.listdir("/")))
print(os.environ.get("OPENAI_API_KEY"), os.environ.get("SOLVER_API_KEY"))
print(open("/proc/self/environ").read().count("KEY"))
"""
    result = run_python(code)
    lines = _lines(result)
    assert lines[:7] == ["FileNotFoundError"] * 7
    assert lines[7] == "['bin', 'dev', 'lib', 'lib64', 'proc', 'sandbox', 'tmp', 'usr']"
    assert lines[8] == "None None"
    assert lines[9] == "0"
    assert key not in result.stdout.text


def test_nothing_outside_the_private_tmp_is_writable(
    sandbox_ready: SandboxVersion, tmp_path: Path
) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    code = f"""
import os
for path in ["/x", "/usr/x", "/sandbox/main.py", "/sandbox/x", "/dev/x", "/proc/x",
             {str(tmp_path / "escaped")!r}, "/usr/lib/python3/dist-packages/sympy/__init__.py"]:
    try:
        with open(path, "a") as handle:
            handle.write("x")
        print(path, "WROTE")
    except OSError as exc:
        print(type(exc).__name__)
with open("/tmp/ok", "w") as handle:
    handle.write("fine")
print(open("/tmp/ok").read())
"""
    lines = _lines(run_python(code))
    assert "WROTE" not in " ".join(lines)
    assert len(lines) == 9 and lines[-1] == "fine"
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_fork_bomb_meets_the_process_limit_and_the_deadline(
    sandbox_ready: SandboxVersion,
) -> None:
    marker = f"bomb{uuid.uuid4().hex[:12]}"
    code = f"""
import os, sys
forks = failures = 0
while True:
    try:
        if os.fork() == 0:
            os.execv("/usr/bin/sleep", [{marker!r}, "3600"])
        forks += 1
    except OSError:
        failures += 1
        if failures == 1:
            print("forked", forks, flush=True)
"""
    limits = Limits(processes=16, wall_s=3.0)
    result = run_python(code, limits)
    assert result.timed_out and result.killed_reason == "wall_time" and result.exit is None
    forks = int(result.stdout.text.split()[1])
    assert forks <= limits.processes - 1
    assert survivors(marker) == []


def test_a_fork_bomb_of_forks_is_contained(sandbox_ready: SandboxVersion) -> None:
    code = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
    result = run_python(code, Limits(processes=16, wall_s=3.0))
    assert result.killed_reason == "wall_time"
    # the orchestrator is unharmed: the next sandbox runs at once
    assert run_python("print(42)").stdout.text == "42\n"


def test_a_memory_bomb_meets_the_address_space_limit(sandbox_ready: SandboxVersion) -> None:
    code = """
blocks = []
try:
    while True:
        blocks.append(bytearray(64 * 1024 * 1024))
except MemoryError:
    print("MemoryError after", len(blocks))
raise MemoryError("and again")
"""
    result = run_python(code, Limits(memory_mb=256))
    assert result.stdout.text.startswith("MemoryError after ")
    assert int(result.stdout.text.split()[-1]) <= 4
    assert result.exit == 1 and "MemoryError: and again" in result.stderr.text


def test_an_infinite_loop_meets_the_cpu_limit(sandbox_ready: SandboxVersion) -> None:
    result = run_python("while True:\n    pass\n", Limits(cpu_s=1, wall_s=60.0))
    assert result.killed_reason == "cpu_time"
    assert result.exit == 128 + 9  # the namespace's init ignores SIGXCPU: the hard limit kills
    assert result.cpu_s is not None and result.cpu_s >= 1


def test_a_sleeping_program_meets_the_wall_deadline(sandbox_ready: SandboxVersion) -> None:
    started = time.monotonic()
    result = run_python("import time\ntime.sleep(3600)\n", Limits(wall_s=1.0))
    assert time.monotonic() - started < 30
    assert result.timed_out and result.killed_reason == "wall_time"
    assert result.exit is None and result.cpu_s is None


def test_a_hundred_megabytes_of_output_are_counted_not_held(
    sandbox_ready: SandboxVersion,
) -> None:
    code = """
import sys
chunk = b"y" * (1024 * 1024)
for _ in range(100):
    sys.stdout.buffer.write(chunk)
sys.stderr.write("e" * 200000)
"""
    tracemalloc.start()
    try:
        result = run_python(code, Limits(output_bytes=4096, wall_s=60.0))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.exit == 0
    assert result.stdout.total_bytes == 100 * 1024 * 1024
    assert result.stdout.kept == b"y" * 4096
    assert result.stderr.total_bytes == 200000 and len(result.stderr.kept) == 4096
    assert peak < 8 * 1024 * 1024  # the orchestrator held a few buffers, never the output


def test_a_big_file_meets_the_file_size_limit(sandbox_ready: SandboxVersion) -> None:
    code = """
try:
    with open("/tmp/big", "wb") as handle:
        handle.write(b"z" * (8 * 1024 * 1024))
except OSError as exc:
    print(exc.errno)
"""
    assert _lines(run_python(code, Limits(file_mb=2))) == ["27"]  # EFBIG


def test_symlinks_lead_nowhere_outside(sandbox_ready: SandboxVersion, tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("host secret")
    code = f"""
import os
links = {{"host": {str(tmp_path / "secret")!r}, "up": "../../../../etc/shadow",
          "root": "/proc/1/root/../../../etc/passwd", "cwd": "/proc/self/cwd/../../../root"}}
for name, target in links.items():
    os.symlink(target, "/tmp/" + name)
    try:
        print(name, open("/tmp/" + name).read())
    except OSError as exc:
        print(name, type(exc).__name__)
print(os.path.realpath("/proc/1/root"))
"""
    lines = _lines(run_python(code))
    assert lines == [
        "host FileNotFoundError",
        "up FileNotFoundError",
        "root FileNotFoundError",
        "cwd FileNotFoundError",
        "/",
    ]


def test_a_detached_background_process_does_not_outlive_the_call(
    sandbox_ready: SandboxVersion,
) -> None:
    marker = f"detached{uuid.uuid4().hex[:12]}"
    code = f"""
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/usr/bin/sleep", [{marker!r}, "3600"])
    os._exit(0)
os.wait()
time.sleep(0.5)
alive = [p for p in os.listdir("/proc") if p.isdigit()
         and {marker!r} in open(f"/proc/{{p}}/cmdline").read()]
print("alive inside", len(alive))
"""
    result = run_python(code)
    assert _lines(result) == ["alive inside 1"]  # it did detach and run
    assert result.exit == 0
    deadline = time.monotonic() + 5
    while survivors(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert survivors(marker) == []
