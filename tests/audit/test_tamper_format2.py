"""Tampering with a real format-2 run (made by the loop over the fake endpoint) is found, and
each finding names its place: the journal line or record, the file, or the manifest path.

Where an edit would break the hash chain on its own, the journal is re-chained after it, as an
attacker would, so the check under test is the one that has to notice."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from solver.audit import AuditReport, audit_run
from solver.store import canonical_json, generate_key_pair
from solver.testing import FakeEndpoint
from tests.loop import scripts
from tests.loop.harness import solve


def h(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    private, public, _ = generate_key_pair(tmp_path_factory.mktemp("keys"))
    return private, public


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, keys: tuple[Path, Path]) -> dict[str, Path]:
    runs: dict[str, Path] = {}
    for name, extra in (("unsigned", {}), ("signed", {"signing_key": keys[0]})):
        tmp = tmp_path_factory.mktemp(name)
        with FakeEndpoint(scripts.fix_after_finding) as fake:
            runs[name] = solve(fake, tmp, candidates=1, **extra).run_dir
    return runs


@pytest.fixture
def unsigned(made: dict[str, Path], tmp_path: Path) -> Path:
    return Path(shutil.copytree(made["unsigned"], tmp_path / "unsigned"))


@pytest.fixture
def signed(made: dict[str, Path], tmp_path: Path) -> Path:
    return Path(shutil.copytree(made["signed"], tmp_path / "signed"))


def records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "journal.jsonl").read_bytes().splitlines()]


def rechain(run: Path, items: list[dict[str, Any]], genesis: str | None = None) -> None:
    """Write ``items`` as a correctly chained journal (seq and prev recomputed)."""
    prev = genesis or h((run / "MANIFEST.json").read_bytes())
    lines = []
    for seq, item in enumerate(items):
        line = canonical_json({**item, "seq": seq, "prev": prev})
        prev = h(line)
        lines.append(line + b"\n")
    (run / "journal.jsonl").write_bytes(b"".join(lines))


def fails(report: AuditReport, name: str) -> list[tuple[str | None, str]]:
    return [(c.where, c.detail) for c in report.checks if c.name == name and c.status == "fail"]


def index_of(items: list[dict[str, Any]], test: Callable[[dict[str, Any]], bool]) -> int:
    return next(i for i, item in enumerate(items) if test(item))


def test_untouched_runs_audit_clean(unsigned: Path, signed: Path, keys: tuple[Path, Path]) -> None:
    assert audit_run(unsigned).ok
    report = audit_run(signed, public_key=keys[1])
    assert report.ok, [c for c in report.checks if c.status == "fail"]
    assert {c.status for c in report.checks if c.name in ("seals", "attestation")} == {"pass"}


def test_last_session_ended_edited_and_rechained_fails_the_seal(
    signed: Path, keys: tuple[Path, Path]
) -> None:
    items = records(signed)
    ended = index_of(items, lambda r: r["type"] == "session.ended")
    assert items[ended]["data"]["reason"] == "finished"
    items[ended]["data"]["reason"] = "interrupted"
    rechain(signed, items)
    report = audit_run(signed, public_key=keys[1])
    seal = f"seals/seal-{ended + 1:08d}.json"
    assert any(w == seal and "altered" in d for w, d in fails(report, "seals")), report
    assert any("altered" in d for _, d in fails(report, "attestation"))


def test_run_finished_edited_and_rechained_disagrees_with_result_json(unsigned: Path) -> None:
    items = records(unsigned)
    finished = index_of(items, lambda r: r["type"] == "run.finished")
    items[finished]["data"]["outcome"] = "unsolved"
    rechain(unsigned, items)
    assert fails(audit_run(unsigned), "final") == [
        (
            "final/result.json",
            f"outcome 'solved', but run.finished (seq {finished}) records 'unsolved'",
        )
    ]


def test_truncation_with_final_kept_fails_naming_the_files(unsigned: Path) -> None:
    items = records(unsigned)
    finished = index_of(items, lambda r: r["type"] == "run.finished")
    rechain(unsigned, items[: finished - 3])
    found = fails(audit_run(unsigned), "final")
    assert {w for w, _ in found} == {"final/proof.md", "final/result.json"}
    assert all(f"names the journal at {finished} records" in d for _, d in found)


def test_truncation_with_later_seals_deleted_fails(signed: Path, keys: tuple[Path, Path]) -> None:
    items = records(signed)
    seals = [i for i, r in enumerate(items) if r["type"] == "seal"]
    assert len(seals) >= 2
    cut = seals[0] + 1  # keep the first seal and its record
    rechain(signed, items[:cut])
    for index in seals[1:]:
        (signed / items[index]["data"]["file"]).unlink()
    report = audit_run(signed, public_key=keys[1])
    attestation = fails(report, "attestation")
    assert attestation and all(w == "attestation.intoto.jsonl" for w, _ in attestation)
    assert any("truncated" in d for _, d in attestation)
    assert any("names seals" in d for _, d in attestation)
    # Deleting the attestation too leaves final/ naming a journal the run no longer holds.
    (signed / "attestation.intoto.jsonl").unlink()
    report = audit_run(signed, public_key=keys[1])
    assert {w for w, _ in fails(report, "final")} == {"final/proof.md", "final/result.json"}


def test_record_of_version_2_fails(unsigned: Path) -> None:
    items = records(unsigned)
    items[-1]["v"] = 2
    rechain(unsigned, items)
    last = len(items) - 1
    assert fails(audit_run(unsigned), "record types") == [
        (f"journal.jsonl seq {last}", "session.ended v2 is not a version this audit knows")
    ]


def test_unknown_record_type_fails(unsigned: Path) -> None:
    items = records(unsigned)
    items.append({**items[-1], "type": "note", "data": {"text": "added"}})
    rechain(unsigned, items)
    assert fails(audit_run(unsigned), "record types") == [
        (f"journal.jsonl seq {len(items) - 1}", "unknown record type 'note'")
    ]


def _append_raw(run: Path, make: Callable[[str, int], bytes]) -> int:
    lines = (run / "journal.jsonl").read_bytes().splitlines()
    number = len(lines)
    with (run / "journal.jsonl").open("ab") as handle:
        handle.write(make(h(lines[-1]), number) + b"\n")
    return number


def test_nan_fails_the_chain_at_its_line(unsigned: Path) -> None:
    number = _append_raw(
        unsigned,
        lambda prev, seq: (
            b'{"data":{"wall_s":NaN},"prev":"%s","seq":%d,"sess":1,"t":"2026-01-01T00:00:00.000000Z",'
            b'"type":"session.ended","v":1}' % (prev.encode(), seq)
        ),
    )
    found = fails(audit_run(unsigned), "chain")
    assert found == [
        (f"journal.jsonl line {number}", f"line {number} is not a record: NaN is not JSON")
    ]


def test_duplicate_keys_fail_the_chain_at_their_line(unsigned: Path) -> None:
    number = _append_raw(
        unsigned,
        lambda prev, seq: (
            b'{"data":{"kind":"phase","reason":"x"},"prev":"%s","seq":%d,"sess":1,'
            b'"t":"2026-01-01T00:00:00.000000Z","type":"run.finished","type":"decision","v":1}'
            % (prev.encode(), seq)
        ),
    )
    found = fails(audit_run(unsigned), "chain")
    assert found == [
        (f"journal.jsonl line {number}", f"line {number} is not a record: duplicate key 'type'")
    ]


def test_record_0_naming_another_run_fails(unsigned: Path) -> None:
    items = records(unsigned)
    items[0]["data"]["run_id"] = "01a23148-02bf-71e3-85e3-4e3908564496"
    rechain(unsigned, items)
    found = fails(audit_run(unsigned), "records")
    assert found[0][0] == "journal.jsonl seq 0" and "run_id" in found[0][1]


def test_wrong_blob_size_fails(unsigned: Path) -> None:
    items = records(unsigned)
    index = index_of(items, lambda r: r["type"] == "artifact.put")
    size = items[index]["data"]["blob"]["bytes"]
    items[index]["data"]["blob"]["bytes"] = size + 1
    rechain(unsigned, items)
    found = fails(audit_run(unsigned), "records")
    assert found == [
        (
            f"journal.jsonl seq {index}",
            f"names blob {items[index]['data']['blob']['blob']} as {size + 1} bytes; it has {size}",
        )
    ]


def test_unmasked_secret_fails_naming_its_path(unsigned: Path) -> None:
    manifest = json.loads((unsigned / "MANIFEST.json").read_bytes())
    manifest["config"]["resolved"]["api_key"] = "sk-live-1234"
    raw = canonical_json(manifest)
    (unsigned / "MANIFEST.json").write_bytes(raw)
    items = records(unsigned)
    items[0]["data"]["manifest"] = h(raw)
    rechain(unsigned, items, genesis=h(raw))
    assert fails(audit_run(unsigned), "credentials") == [
        ("MANIFEST.json", "config.resolved.api_key holds a secret in the clear")
    ]


def test_blob_in_the_wrong_fan_out_folder_says_where_it_is(unsigned: Path) -> None:
    blob = next(p for p in sorted((unsigned / "blobs" / "sha256").rglob("*")) if p.is_file())
    other = "00" if blob.parent.name != "00" else "01"
    (blob.parent.parent / other).mkdir(exist_ok=True)
    moved = blob.parent.parent / other / blob.name
    blob.rename(moved)
    found = fails(audit_run(unsigned), "blobs")
    assert found == [
        (
            f"blobs/sha256/{other}/{blob.name}",
            f"sits in blobs/sha256/{other}/ but a blob of that name belongs in "
            f"blobs/sha256/{blob.name[:2]}/",
        )
    ]


def test_without_a_key_the_run_s_own_key_checks_signatures_and_says_so(signed: Path) -> None:
    rows = [c for c in audit_run(signed).checks if c.name in ("seals", "attestation")]
    assert {c.status for c in rows} == {"warn"}
    assert all("consistent with the key the run itself carries" in c.detail for c in rows)
    path = signed / "attestation.intoto.jsonl"
    envelope = json.loads(path.read_bytes())
    signature = bytearray(base64.b64decode(envelope["signatures"][0]["sig"]))
    signature[0] ^= 1
    envelope["signatures"][0]["sig"] = base64.b64encode(bytes(signature)).decode()
    path.write_bytes(canonical_json(envelope) + b"\n")
    found = fails(audit_run(signed), "attestation")
    assert len(found) == 1 and found[0][0] == "attestation.intoto.jsonl"
    assert "not even the key the run itself carries signed it" in found[0][1]


def test_url_safe_base64_envelopes_verify(signed: Path, keys: tuple[Path, Path]) -> None:
    path = signed / "attestation.intoto.jsonl"
    envelope = json.loads(path.read_bytes())
    for holder, key in ((envelope, "payload"), (envelope["signatures"][0], "sig")):
        raw = base64.b64decode(holder[key])
        holder[key] = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    path.write_bytes(canonical_json(envelope) + b"\n")
    report = audit_run(signed, public_key=keys[1])
    assert [c.status for c in report.checks if c.name == "attestation"] == ["pass"]
