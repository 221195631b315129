"""The store's own journal record types, in the loop's convention (solver/records.py): a frozen
pydantic model with a ``type`` discriminator whose other fields are the line's ``data``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

STORE_RECORD_VERSION = 1
SCHEMA_CHANGES: dict[int, str] = {1: "run.created, seal, recovery.tail_truncated"}
# Record type -> version, per run format. Format 2 chains seals: seal v2 adds ``prev_seal``.
SEAL_VERSION = {1: 1, 2: 2}


class _StoreRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def data(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"type"})


class RunCreated(_StoreRecord):
    """Record 0: binds the journal to MANIFEST.json (its ``prev`` is the same digest)."""

    type: Literal["run.created"] = "run.created"
    manifest: str  # "sha256:<hex>" of MANIFEST.json's bytes
    format: str
    run_id: str


class Seal(_StoreRecord):
    """A signed chain head: ``file`` is a DSSE envelope over {run, count, chain_head, t},
    where ``chain_head`` is the hash of line ``count - 1`` (this record is line ``count``)."""

    type: Literal["seal"] = "seal"
    count: int
    chain_head: str
    file: str  # relative to the run directory
    sha256: str  # "sha256:<hex>" of the seal file's bytes
    keyid: str


class SealV2(Seal):
    """Format 2: a seal also names the seal before it (``prev_seal``, the ``sha256`` of the
    previous ``seal`` record, null for the first), so the seals form a chain of their own."""

    prev_seal: str | None


class TailTruncated(_StoreRecord):
    """A torn tail (an incomplete last line) was moved to ``file`` and cut off the journal."""

    type: Literal["recovery.tail_truncated"] = "recovery.tail_truncated"
    offset: int  # byte offset in journal.jsonl where the torn bytes started
    bytes: int
    sha256: str
    file: str


STORE_RECORD_TYPES = frozenset({"run.created", "seal", "recovery.tail_truncated"})


def store_record_model(type_: str, v: int, format_version: int) -> type[BaseModel] | None:
    """The model of a store record of type ``type_`` and version ``v`` in a run of
    ``format_version``; None when this store does not know that type at that version."""
    if type_ == "run.created" and v == 1:
        return RunCreated
    if type_ == "recovery.tail_truncated" and v == 1:
        return TailTruncated
    if type_ == "seal" and v == SEAL_VERSION.get(format_version):
        return SealV2 if v == 2 else Seal
    return None


def store_record_models() -> tuple[type[BaseModel], ...]:
    """The store's record models, for ``solver schema`` (union with the loop's)."""
    return (RunCreated, Seal, SealV2, TailTruncated)
