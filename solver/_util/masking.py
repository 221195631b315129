"""Masking secrets: the user info and query values of URLs, key fragments in texts, secret
flags in a command line; the test the audit applies to what a run stored; and the check an
endpoint URL must pass. Imports nothing of the project."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

MASK = "***"
# A key fragment shorter than this says nothing about the key (and would mask common words).
FRAGMENT_MIN = 8
ALLOWED_SCHEMES = ("http", "https")


def mask_url(url: str) -> str:
    """The URL with its user info and every query value replaced by ``***``: both are where
    credentials hide in an endpoint URL (``https://user:token@host/v1?key=...``)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:  # not a URL we can take apart: show none of it rather than a secret
        return MASK
    netloc = parts.netloc
    if parts.username is not None or parts.password is not None or "@" in netloc:
        host = f"[{host}]" if ":" in host else host
        netloc = f"{MASK}@{host}" + (f":{port}" if port is not None else "")
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(name, MASK) for name, _ in pairs], safe="*", quote_via=quote)
        query = query or MASK  # a query with no name=value pairs is masked whole
    fragment = MASK if parts.fragment else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def mask_urls_in(text: str) -> str:
    """``text`` with every URL in it passed through :func:`mask_url` (for argv and errors)."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda match: mask_url(match.group(0)), text)


def mask_argv(argv: list[str]) -> list[str]:
    """A command line as it may be stored: URLs masked, and the value after a flag whose name
    says it is a secret (``--api-key``, ``--token``) replaced by ``***``."""
    masked: list[str] = []
    secret_next = False
    for arg in argv:
        if secret_next:
            masked.append(MASK)
            secret_next = False
            continue
        name, equals, _ = arg.partition("=")
        if name.startswith("--") and _SECRET_FLAG.search(name):
            if equals:
                masked.append(f"{name}={MASK}")
            else:
                masked.append(arg)
                secret_next = True
            continue
        masked.append(mask_urls_in(arg))
    return masked


_SECRET_FLAG = re.compile(r"(?:key|token|secret|password|passwd)$", re.IGNORECASE)


_BEARER = re.compile(r"\b(?:Bearer|Basic)\s+(?!\*\*\*)[A-Za-z0-9._~+/=-]{8,}")
_VENDOR_KEY = re.compile(r"\b(?:sk-(?:ant-|proj-)?|hf_|gh[pousr]_|xox[bap]-)[A-Za-z0-9_-]{16,}")


def unmasked_secret(text: str) -> str | None:
    """What in ``text`` looks like a credential that was stored unmasked (a URL's user info
    or query value, a bearer token, a vendor API key), or None. The audit's test."""
    if "://" in text:
        for match in _URL_IN_TEXT.finditer(text):
            try:
                parts = urlsplit(match.group(0))
                user, password = parts.username, parts.password
            except ValueError:
                continue
            if user not in (None, MASK) or password not in (None, MASK):
                return "user info in a URL"
            values = [value for _, value in parse_qsl(parts.query, keep_blank_values=True)]
            if any(value not in ("", MASK) for value in values):
                return "a query value in a URL"
    if _BEARER.search(text):
        return "an authorization token"
    if _VENDOR_KEY.search(text):
        return "an API key"
    return None


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a model endpoint, or None when it can (http or https, a host,
    a port that parses). Checked when the settings are read, so a bad URL fails at once."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        _ = parts.port
    except ValueError as exc:
        return f"not a valid URL ({exc})"
    if parts.scheme.lower() not in ALLOWED_SCHEMES:
        shown = repr(parts.scheme) if parts.scheme else "none"
        return f"unsupported URL scheme {shown} (use http:// or https://)"
    if not host:
        return "the URL names no host"
    if any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in url):
        return "the URL holds spaces or control characters"
    return None


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret masked, and every fragment of one that is at least
    :data:`FRAGMENT_MIN` characters long (a server may echo a key cut short or split)."""
    for secret in secrets:
        if not secret:
            continue
        text = text.replace(secret, MASK)
        if len(secret) < FRAGMENT_MIN or len(text) < FRAGMENT_MIN:
            continue
        grams = {secret[i : i + FRAGMENT_MIN] for i in range(len(secret) - FRAGMENT_MIN + 1)}
        hidden = bytearray(len(text))
        found = False
        for start in range(len(text) - FRAGMENT_MIN + 1):
            if text[start : start + FRAGMENT_MIN] in grams:
                hidden[start : start + FRAGMENT_MIN] = b"\x01" * FRAGMENT_MIN
                found = True
        if found:
            out: list[str] = []
            index = 0
            while index < len(text):
                if hidden[index]:
                    while index < len(text) and hidden[index]:
                        index += 1
                    out.append(MASK)
                else:
                    out.append(text[index])
                    index += 1
            text = "".join(out)
    return text
