"""docs/format.md is complete enough to verify a run without our code: this verifier uses
only the standard library and `cryptography`, and follows the document step by step."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import BuiltRun, Keys, audit_store, build_run


def h(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def dsse_payload(envelope_bytes: bytes, public_pem: bytes) -> dict[str, object]:
    envelope = json.loads(envelope_bytes)
    payload = base64.b64decode(envelope["payload"])
    kind = envelope["payloadType"].encode()
    pae = b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)
    key = load_pem_public_key(public_pem)
    key.verify(base64.b64decode(envelope["signatures"][0]["sig"]), pae)  # type: ignore[union-attr]
    decoded: dict[str, object] = json.loads(payload)
    return decoded


def verify(run: Path, public_pem: bytes) -> list[str]:
    """Every problem found, following "Verifying a run" in docs/format.md."""
    problems: list[str] = []
    genesis = h((run / "MANIFEST.json").read_bytes())
    lines = (run / "journal.jsonl").read_bytes().split(b"\n")
    if lines[-1] != b"":
        problems.append("torn tail")
    records = []
    for n, line in enumerate(lines[:-1]):
        record = json.loads(line)
        expected_prev = genesis if n == 0 else h(lines[n - 1])
        if record["seq"] != n or record["prev"] != expected_prev:
            problems.append(f"chain breaks at line {n}")
        records.append(record)
    if records[0]["type"] != "run.created" or records[0]["data"]["manifest"] != genesis:
        problems.append("manifest not bound")
    for blob in (run / "blobs" / "sha256").glob("*/*"):
        if h(blob.read_bytes()) != "sha256:" + blob.name or blob.parent.name != blob.name[:2]:
            problems.append(f"bad blob {blob.name}")
    for seal in sorted((run / "seals").glob("seal-*.json")):
        payload = dsse_payload(seal.read_bytes(), public_pem)
        count = payload["count"]
        assert isinstance(count, int)
        if count > len(records) or h(lines[count - 1]) != payload["chain_head"]:
            problems.append(f"seal {seal.name} does not match")
    statement = dsse_payload((run / "attestation.intoto.jsonl").read_bytes(), public_pem)
    subjects = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}  # type: ignore[attr-defined]
    (journal_name,) = [name for name in subjects if name.startswith("journal.jsonl@")]
    count = int(journal_name.split("@")[1])
    if count > len(records) or h(lines[count - 1]) != "sha256:" + subjects.pop(journal_name):
        problems.append("attestation head does not match")
    finished = [r for r in records if r["type"] == "run.finished"][-1]
    for name, link in finished["data"]["final"].items():
        if "sha256:" + subjects.get(name, "") != link["blob"]:
            problems.append(f"attestation subject {name} differs")
        if h((run / "final" / name).read_bytes()) != link["blob"]:
            problems.append(f"final/{name} differs")
    return problems


@pytest.fixture
def signed(tmp_path: Path, keys: Keys) -> BuiltRun:
    return build_run(tmp_path / "run", keys.private)


def test_independent_verifier_accepts_what_solver_audit_accepts(
    signed: BuiltRun, keys: Keys
) -> None:
    assert verify(signed.path, keys.public.read_bytes()) == []
    assert audit_store(signed.path, keys.public).ok


def test_independent_verifier_and_audit_agree_on_a_tampered_run(
    signed: BuiltRun, keys: Keys
) -> None:
    lines = (signed.path / "journal.jsonl").read_bytes().split(b"\n")
    lines[5] = lines[5].replace(b'"c1"', b'"c9"')  # the line the seal at count 6 signed
    (signed.path / "journal.jsonl").write_bytes(b"\n".join(lines))
    problems = verify(signed.path, keys.public.read_bytes())
    assert problems == ["chain breaks at line 6", "seal seal-00000006.json does not match"]
    assert not audit_store(signed.path, keys.public).ok


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(where=st.floats(min_value=0.0, max_value=1.0, exclude_max=True), bit=st.integers(0, 7))
def test_any_flipped_bit_in_a_signed_journal_fails_the_audit(
    tmp_path_factory: pytest.TempPathFactory, keys: Keys, where: float, bit: int
) -> None:
    run = build_run(tmp_path_factory.mktemp("flip") / "run", keys.private)
    path = run.path / "journal.jsonl"
    data = bytearray(path.read_bytes())
    data[int(where * len(data))] ^= 1 << bit
    path.write_bytes(bytes(data))
    report = audit_store(run.path, keys.public)
    assert not report.ok, f"a flip at byte {int(where * len(data))} went unnoticed"
