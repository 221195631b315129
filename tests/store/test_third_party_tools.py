"""A run's seals and attestation verify with securesystemslib and the in-toto tools as they are
published: they find the key by the id the run names, the Statement passes the in-toto
attestation v1 validator, and the predicate parses (unknown fields refused) as SLSA Provenance
v1. These libraries are the test extra's; the solver itself does not use them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from google.protobuf import json_format
from in_toto.models.metadata import Envelope as InTotoEnvelope
from in_toto.models.metadata import Metadata
from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import SSlibKey

from solver.store import RunStore

from .conftest import BuiltRun, Keys, audit_store, build_run


def sslib_key(keys: Keys) -> SSlibKey:
    public = load_pem_public_key(keys.public.read_bytes())
    return SSlibKey.from_crypto(public)  # type: ignore[arg-type]


def envelope_of(path: Path) -> Envelope:
    return Envelope.from_dict(json.loads(path.read_bytes()))


@pytest.fixture
def signed(tmp_path: Path, keys: Keys) -> BuiltRun:
    return build_run(tmp_path / "run", keys.private)


def test_the_run_names_the_key_id_securesystemslib_computes(signed: BuiltRun, keys: Keys) -> None:
    key = sslib_key(keys)
    manifest = json.loads((signed.path / "MANIFEST.json").read_bytes())
    assert manifest["signing"]["keyid"] == key.keyid == keys.key_id


def test_every_seal_and_the_attestation_verify_with_securesystemslib(
    signed: BuiltRun, keys: Keys
) -> None:
    key = sslib_key(keys)
    envelopes = sorted((signed.path / "seals").iterdir())
    assert len(envelopes) >= 2
    for path in [*envelopes, signed.path / "attestation.intoto.jsonl"]:
        accepted = envelope_of(path).verify([key], threshold=1)
        assert set(accepted) == {key.keyid}, path.name


def test_securesystemslib_refuses_an_altered_seal(signed: BuiltRun, keys: Keys) -> None:
    path = sorted((signed.path / "seals").iterdir())[-1]
    data = json.loads(path.read_bytes())
    data["payloadType"] = "application/vnd.other+json"
    with pytest.raises(VerificationError):
        Envelope.from_dict(data).verify([sslib_key(keys)], threshold=1)


def test_in_toto_loads_and_verifies_the_attestation(signed: BuiltRun, keys: Keys) -> None:
    metadata = Metadata.load(str(signed.path / "attestation.intoto.jsonl"))
    assert isinstance(metadata, InTotoEnvelope)
    key = sslib_key(keys)
    metadata.verify_signature({"keyid": key.keyid, **key.to_dict()})


def _statement(run: Path) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(envelope_of(run / "attestation.intoto.jsonl").payload)
    return decoded


def test_the_statement_and_its_slsa_predicate_validate(signed: BuiltRun) -> None:
    statement = _statement(signed.path)
    proto = json_format.ParseDict(statement, statement_pb2.Statement())
    Statement.copy_from_pb(proto).validate()
    provenance = json_format.ParseDict(statement["predicate"], provenance_pb2.Provenance())
    assert provenance.build_definition.build_type == "urn:olympiad-solver:orchestrator-run:v1"
    (seal,) = [b for b in provenance.run_details.byproducts if b.name.startswith("seals/")]
    assert seal.annotations["seals"] == len(list((signed.path / "seals").iterdir()))


def test_a_resumed_finished_run_is_attested_again_by_the_same_tools(
    signed: BuiltRun, keys: Keys
) -> None:
    # A torn tail after the attestation: the writer repairs it, seals and re-attests.
    with (signed.path / "journal.jsonl").open("ab") as handle:
        handle.write(b'{"torn')
    RunStore.open(signed.path, signing_key=keys.private).close()
    report = audit_store(signed.path, keys.public)
    attestation = [c for c in report.checks if c.name == "attestation"]
    assert [c.status for c in attestation] == ["pass"], attestation
    envelope_of(signed.path / "attestation.intoto.jsonl").verify([sslib_key(keys)], 1)
    count = len((signed.path / "journal.jsonl").read_bytes().splitlines())
    names = [s["name"] for s in _statement(signed.path)["subject"]]
    assert f"journal.jsonl@{count}" in names


def test_records_a_keyless_writer_appended_are_attested_by_the_next_keyed_one(
    signed: BuiltRun, keys: Keys
) -> None:
    with (signed.path / "journal.jsonl").open("ab") as handle:
        handle.write(b'{"torn')
    RunStore.open(signed.path).close()  # repaired without the key: nothing signs the repair
    report = audit_store(signed.path, keys.public)
    assert [c.status for c in report.checks if c.name == "attestation"] == ["warn", "pass"]
    RunStore.open(signed.path, signing_key=keys.private).close()
    report = audit_store(signed.path, keys.public)
    assert [c.status for c in report.checks if c.name == "attestation"] == ["pass"]
    envelope_of(signed.path / "attestation.intoto.jsonl").verify([sslib_key(keys)], 1)
