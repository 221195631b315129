"""Benchmark: `solver audit` throughput against `sha256sum` over the same files, and journal
appends per second with one fsync each against a bare write+fdatasync loop.

Usage: python bench/audit.py [--small] [--records N] [--blob-mib M] [--appends K]
                             [--real-calls C]

It builds a synthetic run in a temporary directory (100,000 records and 1 GiB of blobs by
default; --small: 10,000 records and 64 MiB), times the sides in turns, three rounds (warm page
cache, best round of each), prints a table, and deletes everything it wrote. The synthetic
records are not the loop's, so that part runs the store's checks only. A second part makes a
real run of C model calls (default 120; 0 skips it) against the scripted fake endpoint on
127.0.0.1 and times the full audit, loop checks included (calls, prompts, isolation, network),
with the time of each check.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from solver.audit import audit_run, default_checks, store_checks  # noqa: E402
from solver.audit import base as audit_module  # noqa: E402
from solver.store import RunStore, canonical_json  # noqa: E402
from solver.store.blobs import BlobStore  # noqa: E402
from solver.store.journal import line_hash  # noqa: E402
from solver.store.manifest import utc_now  # noqa: E402

MIB = 1 << 20


def build_run(run_dir: Path, records: int, blob_bytes: int) -> list[Path]:
    """Write the run-directory layout directly (no fsync: the build is not what is measured):
    blobs of varied sizes totalling ``blob_bytes``, and ``records`` chained records, each
    naming one blob. Returns every file the audit hashes."""
    with RunStore.create(run_dir, {"problem": {"sha256": "00" * 32}}) as store:
        genesis_head = store.head
    blobs = BlobStore(run_dir / "blobs")
    count = max(1, records // 5)
    average = blob_bytes // count
    noise = os.urandom(2 * average + 64)
    digests: list[tuple[str, int]] = []
    for index in range(count):
        size = max(64, average // 2 + (index * 7919) % (average + 1))  # spread around average
        data = index.to_bytes(8, "big") + noise[: size - 8]
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        path = blobs.path_for(digest)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        digests.append((digest, len(data)))
    head, lines = genesis_head, []
    for seq in range(1, records):
        digest, size = digests[seq % count]
        line = canonical_json(
            {
                "data": {"call_id": f"c{seq}", "response": {"blob": digest, "bytes": size}},
                "prev": head,
                "seq": seq,
                "sess": 1,
                "t": utc_now(),
                "type": "bench.record",
                "v": 1,
            }
        )
        head = line_hash(line)
        lines.append(line + b"\n")
    with (run_dir / "journal.jsonl").open("ab") as handle:
        handle.write(b"".join(lines))
    return [run_dir / "MANIFEST.json", run_dir / "journal.jsonl", *blobs.iter_files()]


def interleaved_best(rounds: int, actions: list[Callable[[], None]]) -> list[float]:
    """Best time of each action over ``rounds`` rounds, the actions taking turns in every
    round, so that load from other processes on a shared machine hits all of them alike."""
    best = [float("inf")] * len(actions)
    for _ in range(rounds):
        for index, action in enumerate(actions):
            start = time.perf_counter()
            action()
            best[index] = min(best[index], time.perf_counter() - start)
    return best


def run_sha256sum(files: list[Path]) -> None:
    for start in range(0, len(files), 2000):
        batch = [str(p) for p in files[start : start + 2000]]
        subprocess.run(["sha256sum", "--", *batch], check=True, stdout=subprocess.DEVNULL)


def run_openssl(files: list[Path]) -> None:
    for start in range(0, len(files), 2000):
        batch = [str(p) for p in files[start : start + 2000]]
        subprocess.run(
            ["openssl", "dgst", "-sha256", *batch], check=True, stdout=subprocess.DEVNULL
        )


def run_audit(run_dir: Path, workers: int) -> None:
    audit_module.HASH_WORKERS = workers
    report = audit_run(run_dir, checks=store_checks())
    if not report.ok:
        raise SystemExit(f"audit of the synthetic run failed: {report.checks}")


def appends_per_second(run_dir: Path, appends: int) -> float:
    with RunStore.open(run_dir) as store:
        ref = store.put_blob(b"bench")
        start = time.perf_counter()
        for index in range(appends):
            store.append("bench.append", {"n": index, "response": ref.as_ref()})
        return appends / (time.perf_counter() - start)


def raw_fsync_per_second(directory: Path, appends: int, line_size: int) -> float:
    path = directory / "raw.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    line = b"x" * (line_size - 1) + b"\n"
    try:
        start = time.perf_counter()
        for _ in range(appends):
            os.write(fd, line)
            os.fdatasync(fd)
        return appends / (time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()


def real_run(run_dir: Path, calls: int) -> None:
    """A real run of ``calls`` model calls (every candidate keeps a flaw, so the run spends
    its whole budget), made by the loop against the scripted fake endpoint."""
    from bench.report import make_run, never_accepted
    from solver.testing import FakeEndpoint

    with FakeEndpoint(never_accepted) as fake:
        make_run(fake.url, run_dir, calls)


def full_audit_table(run_dir: Path, rounds: int) -> None:
    """sha256sum, the store's checks and the full audit on a real run, then each check."""
    files = [p for p in run_dir.rglob("*") if p.is_file() and p.name != ".lock"]
    total = sum(p.stat().st_size for p in files)
    records = (run_dir / "journal.jsonl").read_bytes().count(b"\n")

    def audit(checks: list[audit_module.AuditCheck] | None) -> None:
        report = audit_run(run_dir, checks=checks)
        if checks is None and not report.ok:
            raise SystemExit(f"audit of the real run failed: {report.checks}")

    checks = default_checks()
    run_sha256sum(files)
    times = interleaved_best(
        rounds,
        [
            lambda: run_sha256sum(files),
            lambda: audit(store_checks()),
            lambda: audit(None),
            lambda: audit([]),
            *[lambda c=check: audit([c]) for check in checks],
        ],
    )
    t_sum, t_store, t_full, t_none = times[:4]
    print(f"\nreal run: {records} records, {len(files)} files, {total / MIB:.1f} MiB")
    print(f"{'verifier':<32} {'seconds':>9} {'vs sha256sum':>13}")
    print(f"{'sha256sum (1 process)':<32} {t_sum:>9.3f} {1.0:>12.2f}x")
    print(f"{'solver audit, store checks':<32} {t_store:>9.3f} {t_sum / t_store:>12.2f}x")
    print(f"{'solver audit, full':<32} {t_full:>9.3f} {t_sum / t_full:>12.2f}x")
    print(f"\n{'check (reading the run: ' + f'{t_none:.3f} s)':<32} {'seconds':>9}")
    for check, seconds in zip(checks, times[4:], strict=True):
        name = getattr(check, "__name__", "check").removeprefix("check_")
        print(f"{name:<32} {max(seconds - t_none, 0.0):>9.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="10,000 records and 64 MiB")
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--blob-mib", type=int, default=None)
    parser.add_argument("--appends", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per side")
    parser.add_argument("--dir", type=Path, default=None, help="where to put the temp run")
    parser.add_argument("--real-calls", type=int, default=120, help="calls of the real run")
    args = parser.parse_args(argv)
    records = args.records or (10_000 if args.small else 100_000)
    blob_mib = args.blob_mib or (64 if args.small else 1024)
    appends = args.appends or (300 if args.small else 2000)
    with tempfile.TemporaryDirectory(prefix="bench-audit-", dir=args.dir) as tmp:
        run_dir = Path(tmp) / "run"
        started = time.perf_counter()
        files = build_run(run_dir, records, blob_mib * MIB)
        total = sum(p.stat().st_size for p in files)
        print(
            f"synthetic run: {records} records, {len(files) - 2} blobs, "
            f"{total / MIB:.0f} MiB in all (built in {time.perf_counter() - started:.1f} s)"
        )
        run_sha256sum(files)  # warm the page cache for both sides alike
        cpus = audit_module.HASH_WORKERS
        actions = [
            lambda: run_sha256sum(files),
            lambda: run_audit(run_dir, cpus),
            lambda: run_audit(run_dir, 1),
        ]
        # openssl uses the CPU's SHA instructions like Python's hashlib does; coreutils'
        # sha256sum may not, so openssl shows what the audit costs beyond hashing itself.
        has_openssl = shutil.which("openssl") is not None
        if has_openssl:
            actions.append(lambda: run_openssl(files))
        times = interleaved_best(args.rounds, actions)
        t_sum, t_audit, t_audit_1 = times[:3]
        line_size = len((run_dir / "journal.jsonl").read_bytes().splitlines()[-1]) + 1
        # The build left its files unsynced; flush them first so that neither side pays for
        # the other's dirty pages (ext4 ordered mode flushes them at a journal commit).
        os.sync()
        raw_rate = max(raw_fsync_per_second(Path(tmp), appends, line_size) for _ in range(2))
        store_rate = max(appends_per_second(run_dir, appends) for _ in range(2))
    rows = [
        ("sha256sum (1 process)", total / MIB / t_sum, t_sum, 1.0),
        (f"solver audit ({cpus} hash threads)", total / MIB / t_audit, t_audit, t_sum / t_audit),
        ("solver audit (1 hash thread)", total / MIB / t_audit_1, t_audit_1, t_sum / t_audit_1),
    ]
    if has_openssl:
        t_ssl = times[3]
        rows.append(("openssl dgst -sha256 (1 process)", total / MIB / t_ssl, t_ssl, t_sum / t_ssl))
    print(f"\n{'verifier':<32} {'MiB/s':>9} {'seconds':>9} {'vs sha256sum':>13}")
    for name, rate, seconds, ratio in rows:
        print(f"{name:<32} {rate:>9.0f} {seconds:>9.2f} {ratio:>12.2f}x")
    print(f"\n{'journal append (' + str(appends) + ' records)':<32} {'per s':>9} {'ratio':>9}")
    print(f"{'write + fdatasync, bare':<32} {raw_rate:>9.0f} {1.0:>8.2f}x")
    print(f"{'RunStore.append':<32} {store_rate:>9.0f} {store_rate / raw_rate:>8.2f}x")
    if args.real_calls > 0:
        with tempfile.TemporaryDirectory(prefix="bench-audit-real-", dir=args.dir) as tmp:
            run_dir = Path(tmp) / "run"
            real_run(run_dir, args.real_calls)
            full_audit_table(run_dir, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
