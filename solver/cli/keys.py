"""`solver keys new [--out DIR]`: make the Ed25519 key pair that signs run seals and
attestations. The private key is written with mode 0600 and never replaced.

Exit codes: 0 on success, 2 when a key already exists at the destination or it cannot be
written.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from solver.cli.errors import reports_errors
from solver.errors import InputError
from solver.store import StoreError, generate_key_pair

__all__ = ["keys"]


def default_key_dir() -> Path:
    """``$XDG_CONFIG_HOME/olympiad-solver/keys`` (``~/.config/...`` when unset)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "olympiad-solver" / "keys"


@click.group("keys")
def keys() -> None:
    """Manage the signing keys of runs."""


@keys.command("new")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Directory for the key pair (default: $XDG_CONFIG_HOME/olympiad-solver/keys).",
)
@reports_errors
def new(out_dir: Path | None) -> None:
    """Create a new Ed25519 key pair; print the public key path and the key id."""
    target = out_dir if out_dir is not None else default_key_dir()
    try:
        private_path, public_path, key_id = generate_key_pair(target)
    except (StoreError, OSError) as exc:
        raise InputError(str(exc)) from None
    click.echo(f"private key: {private_path}  (mode 0600; set signing_key to this path)")
    click.echo(f"public key:  {public_path}  (give it to `solver audit --key`)")
    click.echo(f"key id:      {key_id}")
