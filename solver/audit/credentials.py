"""Audit check ``credentials``: no secret is stored in the clear, in the manifest or in any
record's data (blobs hold model text and are not searched).

One walk over each JSON value finds both kinds: a non-empty value other than ``***`` under a
key named like a secret (``api_key``, ``token``, ...: the store masks those before writing),
and a string (a key too) holding a credential of its own: a URL's user info or query value, a
bearer token, a vendor API key (every writer masks them). Either was written by something else
or the masking broke, and the run is not shareable. Each finding names its dotted path.
"""

from __future__ import annotations

import re
from typing import Any

from solver._util.masking import unmasked_secret
from solver.audit.base import AuditContext, Check, capped
from solver.store import MASK, is_secret_key

NAME = "credentials"

# A URL that carries a password (scheme://user:password@host), even one urlsplit refuses.
_URL_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s]*:[^/?#@\s]+@")


def _in_text(text: str) -> str | None:
    what = unmasked_secret(text)
    if what is None and _URL_PASSWORD.match(text):
        what = "a password in a URL"
    return what


def findings(value: Any) -> list[str]:
    """``<dotted path> holds ...`` for each secret in the clear under ``value``; iterative,
    so a deeply nested value cannot exhaust the stack."""
    found: list[str] = []
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                where = f"{path}.{key}" if path else str(key)
                what = _in_text(str(key))
                if what is not None:
                    found.append(f"{where} (the key) holds {what}, unmasked")
                if isinstance(child, str) and child and child != MASK and is_secret_key(str(key)):
                    found.append(f"{where} holds a secret in the clear")
                else:
                    stack.append((where, child))
        elif isinstance(item, list):
            stack.extend((f"{path}[{n}]", child) for n, child in reversed(list(enumerate(item))))
        elif isinstance(item, str):
            what = _in_text(item)
            if what is not None:
                found.append(f"{path} holds {what}, unmasked")
    return found


def check_credentials(ctx: AuditContext) -> list[Check]:
    rows = [
        Check(name=NAME, status="fail", where="MANIFEST.json", detail=detail)
        for detail in findings(ctx.manifest)
    ]
    for record in ctx.records:
        rows.extend(
            Check(name=NAME, status="fail", where=ctx.at(record), detail=f"data.{detail}")
            for detail in findings(record.data)
        )
    if not rows:
        rows.append(
            Check(
                name=NAME,
                status="pass",
                detail="no secret in the clear: secret-named values masked, no URL "
                "credentials, tokens or API keys in the manifest or the journal",
            )
        )
    return capped(NAME, rows)
