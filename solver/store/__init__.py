"""The run directory: content-addressed blobs, a hash-chained journal, an immutable manifest,
signed seals and an attestation. Knows nothing of the loop; see docs/format.md."""

from solver._util.clock import record_time as utc_now
from solver.store._fs import canonical_json, read_regular, write_atomic
from solver.store.attest import generate_key_pair, load_public_key, pae
from solver.store.blobs import BlobRef, BlobWriter, iter_blob_refs, parse_digest
from solver.store.errors import (
    BlobCorrupt,
    BlobMissing,
    CorruptionError,
    LockHeld,
    NotARun,
    RunExists,
    StorageFull,
    StoreError,
    UnsafeEntry,
)
from solver.store.journal import Record
from solver.store.manifest import FORMAT
from solver.store.models import STORE_RECORD_TYPES, store_record_models
from solver.store.reader import RunReader
from solver.store.run import RunStore, holds_only_create_leftovers

__all__ = [
    "FORMAT",
    "STORE_RECORD_TYPES",
    "BlobCorrupt",
    "BlobMissing",
    "BlobRef",
    "BlobWriter",
    "CorruptionError",
    "LockHeld",
    "NotARun",
    "Record",
    "RunExists",
    "RunReader",
    "RunStore",
    "StorageFull",
    "StoreError",
    "UnsafeEntry",
    "canonical_json",
    "generate_key_pair",
    "holds_only_create_leftovers",
    "iter_blob_refs",
    "load_public_key",
    "pae",
    "parse_digest",
    "read_regular",
    "store_record_models",
    "utc_now",
    "write_atomic",
]
