"""DSSE PAE against the specification's example, envelopes, keys."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key

from solver.store import StoreError, pae
from solver.store.attest import (
    SignatureInvalid,
    generate_key_pair,
    key_id,
    load_private_key,
    load_public_key,
    parse_envelope,
    sign_envelope,
    verify_envelope,
)

from .conftest import Keys


def test_pae_matches_the_dsse_specification_example() -> None:
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_pae_counts_bytes_not_characters() -> None:
    # "é" is one character but two UTF-8 bytes; a character count would say 1.
    assert pae("é", "ü".encode()) == b"DSSEv1 2 \xc3\xa9 2 \xc3\xbc"


def test_envelope_round_trip_and_wrong_key(keys: Keys, other_keys: Keys) -> None:
    data = sign_envelope("application/x-test", b"payload", load_private_key(keys.private))
    envelope, payload = parse_envelope(data)
    assert payload == b"payload"
    assert envelope.signatures[0].keyid == keys.key_id
    verify_envelope(envelope, payload, load_public_key(keys.public))
    with pytest.raises(SignatureInvalid, match="no signature verifies"):
        verify_envelope(envelope, payload, load_public_key(other_keys.public))
    with pytest.raises(SignatureInvalid):
        verify_envelope(envelope, b"other payload", load_public_key(keys.public))


def test_garbled_signature_and_malformed_envelopes(keys: Keys) -> None:
    data = json.loads(sign_envelope("t", b"p", load_private_key(keys.private)))
    data["signatures"].insert(0, {"keyid": "x", "sig": "!!not base64!!"})
    envelope, payload = parse_envelope(json.dumps(data).encode())
    verify_envelope(envelope, payload, load_public_key(keys.public))  # the good one still counts
    for bad in (b"{}", b"not json", json.dumps({**data, "payload": "@@@"}).encode()):
        with pytest.raises(SignatureInvalid, match="not a DSSE envelope"):
            parse_envelope(bad)


def test_new_key_pair_is_private_and_never_replaced(tmp_path: Path) -> None:
    private, public, kid = generate_key_pair(tmp_path / "k")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert key_id(load_public_key(public)) == kid
    assert base64.b64decode(public.read_text().splitlines()[1])  # PEM body
    with pytest.raises(StoreError, match="already exists"):
        generate_key_pair(tmp_path / "k")


def test_unreadable_or_foreign_keys_are_refused(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a key")
    with pytest.raises(StoreError, match="cannot read private key"):
        load_private_key(junk)
    with pytest.raises(StoreError, match="cannot read public key"):
        load_public_key(junk)
    ec_key = generate_private_key(SECP256R1())
    ec_private = tmp_path / "ec.key"
    ec_private.write_bytes(
        ec_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    ec_public = tmp_path / "ec.pub"
    ec_public.write_bytes(
        ec_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    with pytest.raises(StoreError, match="not an Ed25519 private key"):
        load_private_key(ec_private)
    with pytest.raises(StoreError, match="not an Ed25519 public key"):
        load_public_key(ec_public)
