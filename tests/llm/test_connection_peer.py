"""What a ``net.connect`` record says a connection reached when its socket can no longer say:
a server that resets a connection at once leaves ``getpeername`` failing, and the audit must
still be able to judge the connection (tests/loop/test_resume.py saw it when an endpoint went
away mid-run)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from solver.llm import Connection, Endpoint, ModelClient


class _Stream:
    def __init__(self, peer: tuple[str, int] | None, fails: bool = False) -> None:
        self.peer, self.fails = peer, fails

    def get_extra_info(self, name: str) -> Any:
        assert name == "server_addr"
        if self.fails:
            raise OSError(107, "Transport endpoint is not connected")
        return self.peer


def _recorded(base_url: str, dialled: tuple[str, int], stream: _Stream) -> Connection:
    seen: list[Connection] = []
    client = ModelClient(Endpoint(base_url=base_url, api="chat", model="m"), on_connect=seen.append)
    trace = client._tracer(None)

    async def connect() -> None:
        host, port = dialled
        await trace("connection.connect_tcp.started", {"host": host, "port": port})
        await trace("connection.connect_tcp.complete", {"return_value": stream})

    asyncio.run(connect())
    (connection,) = seen
    return connection


def test_the_peer_the_socket_reports_is_recorded() -> None:
    got = _recorded("http://127.0.0.1:8000", ("127.0.0.1", 8000), _Stream(("127.0.0.1", 8000)))
    assert got == Connection(host="127.0.0.1", port=8000, address="127.0.0.1:8000")


@pytest.mark.parametrize("stream", [_Stream(None), _Stream(None, fails=True)])
def test_a_reset_socket_dialled_by_ip_records_the_ip_it_reached(stream: _Stream) -> None:
    got = _recorded("http://127.0.0.1:8000", ("127.0.0.1", 8000), stream)
    assert got.address == "127.0.0.1:8000"


def test_a_reset_socket_dialled_by_name_records_no_address() -> None:
    """A name could have resolved anywhere: with no peer reported, nothing is claimed, and the
    audit fails the connection (docs/format.md, Network)."""
    got = _recorded("http://localhost:8000", ("localhost", 8000), _Stream(None, fails=True))
    assert got.address == ""
