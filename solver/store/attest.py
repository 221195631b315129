"""Signing: Ed25519 keys, DSSE envelopes, chain-head seals and the in-toto attestation.

DSSE (github.com/secure-systems-lab/dsse, envelope v1) signs
``PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`` where LEN is the
decimal *byte* length. The attestation is an in-toto Statement v1 with an SLSA Provenance v1
predicate. Both are implemented here (a few dozen lines) rather than pulled from a library.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel, ConfigDict, ValidationError

from solver.store._fs import canonical_json, write_atomic
from solver.store.errors import StoreError

PAYLOAD_INTOTO = "application/vnd.in-toto+json"
PAYLOAD_SEAL = "application/vnd.olympiad-solver.seal+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_SLSA = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "urn:olympiad-solver:orchestrator-run:v1"
PRIVATE_KEY_NAME = "solver-ed25519.key"
PUBLIC_KEY_NAME = "solver-ed25519.pub"


class SignatureInvalid(StoreError):
    """A DSSE envelope is malformed or carries no signature the given key verifies."""


class DsseSignature(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    keyid: str = ""
    sig: str


class DsseEnvelope(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    payload: str
    payloadType: str
    signatures: list[DsseSignature]


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE pre-authentication encoding, with byte lengths (not character counts)."""
    type_bytes = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(type_bytes), type_bytes, len(payload), payload)


def _raw(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(public_key: Ed25519PublicKey) -> str:
    """The key id of format 2: hex SHA-256 of the canonical JSON key document
    ``{"keytype":"ed25519","keyval":{"public":"<raw key hex>"},"scheme":"ed25519"}``, which is
    the id securesystemslib and the in-toto tools compute for the key, so they find it."""
    document = {
        "keytype": "ed25519",
        "keyval": {"public": _raw(public_key).hex()},
        "scheme": "ed25519",
    }
    return hashlib.sha256(canonical_json(document)).hexdigest()


def key_id_v1(public_key: Ed25519PublicKey) -> str:
    """The key id of format 1 runs: hex SHA-256 of the raw 32-byte public key."""
    return hashlib.sha256(_raw(public_key)).hexdigest()


def key_ids(public_key: Ed25519PublicKey) -> frozenset[str]:
    """Both ids a run may name the key by (format 2, format 1)."""
    return frozenset({key_id(public_key), key_id_v1(public_key)})


def public_key_from_pem(pem: str) -> Ed25519PublicKey:
    """The Ed25519 key a run's manifest carries (``signing.public_key``); StoreError if not."""
    try:
        key = serialization.load_pem_public_key(pem.encode("ascii"))
    except (ValueError, UnicodeEncodeError) as exc:
        raise StoreError(f"not a PEM public key: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise StoreError("not an Ed25519 public key")
    return key


def b64decode_any(text: str) -> bytes:
    """DSSE allows standard or URL-safe base64, with or without padding; accept all four."""
    if not text.isascii():
        raise ValueError("base64 text is not ASCII")
    url_safe = "-" in text or "_" in text
    if url_safe and ("+" in text or "/" in text):
        raise ValueError("base64 text mixes the standard and URL-safe alphabets")
    if url_safe:
        text = text.replace("-", "+").replace("_", "/")
    text += "=" * (-len(text) % 4)
    return base64.b64decode(text, validate=True)


def public_key_pem(public_key: Ed25519PublicKey) -> str:
    return public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode("ascii")


def load_private_key(path: Path) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise StoreError(f"cannot read private key {path}: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise StoreError(f"{path} is not an Ed25519 private key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise StoreError(f"cannot read public key {path}: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise StoreError(f"{path} is not an Ed25519 public key")
    return key


def generate_key_pair(out_dir: Path) -> tuple[Path, Path, str]:
    """Write a new Ed25519 pair into ``out_dir`` (private key mode 0600); refuse to replace
    an existing one. Returns (private path, public path, key id)."""
    private_path = out_dir / PRIVATE_KEY_NAME
    public_path = out_dir / PUBLIC_KEY_NAME
    for path in (private_path, public_path):
        if path.exists():
            raise StoreError(f"{path} already exists; not replacing a key")
    out_dir.mkdir(parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, pem)
        os.fsync(fd)
    finally:
        os.close(fd)
    write_atomic(public_path, public_key_pem(key.public_key()).encode("ascii"))
    return private_path, public_path, key_id(key.public_key())


def sign_envelope(
    payload_type: str, payload: bytes, key: Ed25519PrivateKey, keyid: str | None = None
) -> bytes:
    """A DSSE envelope as canonical JSON bytes; ``keyid`` defaults to :func:`key_id`."""
    signature = key.sign(pae(payload_type, payload))
    envelope = {
        "payload": base64.b64encode(payload).decode("ascii"),
        "payloadType": payload_type,
        "signatures": [
            {
                "keyid": keyid or key_id(key.public_key()),
                "sig": base64.b64encode(signature).decode(),
            }
        ],
    }
    return canonical_json(envelope)


def parse_envelope(data: bytes) -> tuple[DsseEnvelope, bytes]:
    """The envelope and its decoded payload; SignatureInvalid when malformed."""
    try:
        envelope = DsseEnvelope.model_validate_json(data)
        payload = b64decode_any(envelope.payload)
    except (ValidationError, binascii.Error, ValueError) as exc:
        raise SignatureInvalid(f"not a DSSE envelope: {exc}") from None
    return envelope, payload


def verify_envelope(envelope: DsseEnvelope, payload: bytes, key: Ed25519PublicKey) -> None:
    """Raise SignatureInvalid unless some signature verifies with ``key``."""
    message = pae(envelope.payloadType, payload)
    for entry in envelope.signatures:
        try:
            key.verify(b64decode_any(entry.sig), message)
        except (InvalidSignature, binascii.Error, ValueError):
            continue
        return
    raise SignatureInvalid(f"no signature verifies with key {key_id(key)[:16]}")


_UNSET: Any = object()


def seal_payload(
    run_id: str, count: int, chain_head: str, t: str, prev_seal: str | None = _UNSET
) -> bytes:
    """A seal's signed payload. Format 2 adds ``prev_seal`` (the digest of the seal file
    before it, null for the first); format 1 leaves it out."""
    body: dict[str, Any] = {"chain_head": chain_head, "count": count, "run": run_id, "t": t}
    if prev_seal is not _UNSET:
        body["prev_seal"] = prev_seal
    return canonical_json(body)


def policies_of(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The run's policies as the manifest records them: role isolation (``roles``) and the
    network allow-list (``network``)."""
    return {"roles": manifest.get("roles"), "network": manifest.get("network")}


def build_statement(
    subjects: Mapping[str, str],
    manifest: Mapping[str, Any],
    *,
    manifest_digest: str,
    journal_count: int,
    journal_head: str,
    last_seal: str | None,
    finished: str,
    version: str,
    seals: tuple[int, str] | None = None,
) -> dict[str, Any]:
    """An in-toto Statement v1 whose subjects are the final artifacts (name -> digest) and
    the journal, named ``journal.jsonl@<count>`` with the chain head as its digest.

    ``seals`` (format 2): (number of seal records, file of the last) before the attestation;
    the last seal is then named by its file and annotated with that number."""
    subject = [
        {"name": name, "digest": {"sha256": digest.removeprefix("sha256:")}}
        for name, digest in sorted(subjects.items())
    ]
    subject.append(
        {
            "name": f"journal.jsonl@{journal_count}",
            "digest": {"sha256": journal_head.removeprefix("sha256:")},
        }
    )
    byproducts: list[dict[str, Any]] = [
        {"name": "MANIFEST.json", "digest": {"sha256": manifest_digest.removeprefix("sha256:")}}
    ]
    if last_seal is not None:
        seal_hex = last_seal.removeprefix("sha256:")
        if seals is None:
            byproducts.append({"name": "last-seal", "digest": {"sha256": seal_hex}})
        else:
            count, file = seals
            byproducts.append(
                {"name": file, "digest": {"sha256": seal_hex}, "annotations": {"seals": count}}
            )
    return {
        "_type": STATEMENT_TYPE,
        "subject": subject,
        "predicateType": PREDICATE_SLSA,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "problem": manifest.get("problem"),
                    "config": manifest.get("config"),
                },
                "internalParameters": {
                    "policies": policies_of(manifest),
                    "code": manifest.get("code"),
                    "model": manifest.get("model"),
                    "templates": manifest.get("templates"),
                },
            },
            "runDetails": {
                "builder": {"id": f"urn:olympiad-solver:{version}"},
                "metadata": {
                    "invocationId": str(manifest.get("run_id", "")),
                    "startedOn": manifest.get("created"),
                    "finishedOn": finished,
                },
                "byproducts": byproducts,
            },
        },
    }
