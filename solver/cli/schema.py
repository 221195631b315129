"""`solver schema`: the JSON Schema of every journal record type."""

from __future__ import annotations

import json

import click

from solver.records import RECORD_VERSION, SCHEMA_CHANGES, loop_records_schema
from solver.store import store_record_models


@click.command("schema")
def schema() -> None:
    """Print the JSON Schema of the journal's record types (loop and store)."""
    document = {
        "loop_records": loop_records_schema(),
        "loop_record_version": RECORD_VERSION,
        "changes": {str(k): v for k, v in SCHEMA_CHANGES.items()},
        "store_records": {m.__name__: m.model_json_schema() for m in store_record_models()},
    }
    click.echo(json.dumps(document, indent=2, sort_keys=True))
