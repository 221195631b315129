"""The one ``credentials`` check finds both kinds of secret the audit looks for (values under
secret-named keys, and credentials inside any string or key), each named by its path."""

from __future__ import annotations

import pytest

from solver.audit.credentials import findings

CASES: list[tuple[object, list[str]]] = [
    ({"config": {"api_key": "plain"}}, ["config.api_key holds a secret in the clear"]),
    ({"config": {"api_key": "***", "token": ""}}, []),
    ({"max_tokens": 5, "tokenizer_sha256": "abc"}, []),
    (
        {"argv": ["solve", "--endpoint", "http://u:pw@127.0.0.1:1/v1"]},
        ["argv[2] holds user info in a URL, unmasked"],
    ),
    ({"url": "http://***@127.0.0.1:1/v1?token=***"}, []),
    ({"url": "http://127.0.0.1:1/v1?key=abc"}, ["url holds a query value in a URL, unmasked"]),
    ({"note": "header Bearer abcdefghijkl"}, ["note holds an authorization token, unmasked"]),
    ({"m": ["x", {"k": "sk-" + "a" * 20}]}, ["m[1].k holds an API key, unmasked"]),
    # a URL urlsplit refuses (an unclosed IPv6 bracket) still shows its password
    ({"u": "http://u:pw@[::1/v1"}, ["u holds a password in a URL, unmasked"]),
    ({"http://u:pw@h/": 1}, ["http://u:pw@h/ (the key) holds user info in a URL, unmasked"]),
    (
        {"a": {"password": "x"}, "b": "hf_" + "b" * 20},
        ["a.password holds a secret in the clear", "b holds an API key, unmasked"],
    ),
]


@pytest.mark.parametrize(("value", "expected"), CASES)
def test_each_secret_is_found_and_named(value: object, expected: list[str]) -> None:
    assert findings(value) == expected


def test_deep_nesting_does_not_exhaust_the_stack() -> None:
    value: object = "sk-" + "c" * 20
    for _ in range(5000):
        value = [value]
    (found,) = findings(value)
    assert found.endswith("holds an API key, unmasked")
