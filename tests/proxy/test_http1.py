"""The upstream HTTP/1.1 client: chunked decoding split anywhere, keep-alive reuse, a stale
kept-alive connection, length and close-delimited bodies, refused connections."""

from __future__ import annotations

import asyncio
import ssl

import pytest

from solver.proxy._http1 import Dechunker, Http1Error, Http1Pool

BODY = b'data: {"a":"\xe4\xbd\xa0"}\n\n' * 3 + b"data: [DONE]\n\n"


def _chunked(body: bytes, size: int) -> bytes:
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    out = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in pieces)
    return out + b"0\r\nx-trailer: 1\r\n\r\n"


@pytest.mark.parametrize("size", [1, 7, 1000])
def test_dechunker_at_every_split(size: int) -> None:
    wire = _chunked(BODY, size)
    for cut in range(len(wire) + 1):
        decoder = Dechunker()
        out = decoder.feed(wire[:cut]) + decoder.feed(wire[cut:])
        assert out == BODY and decoder.done and not decoder.leftover


def test_dechunker_refuses_garbage() -> None:
    with pytest.raises(Http1Error):
        Dechunker().feed(b"zz\r\nabc\r\n")
    with pytest.raises(Http1Error):
        Dechunker().feed(b"3\r\nabcXX")


async def _server(
    answers: list[bytes], close_after: bool = False
) -> tuple[asyncio.Server, list[int]]:
    connections: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        while answers:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            writer.write(answers.pop(0))
            await writer.drain()
            if close_after:
                break
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, connections


def test_pool_reuses_connections_and_reads_every_body_kind() -> None:
    async def main() -> None:
        chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + _chunked(BODY, 9)
        length = b"HTTP/1.1 429 Too Many\r\ncontent-length: 5\r\n\r\nslow!"
        server, connections = await _server([chunked, length, chunked])
        port = server.sockets[0].getsockname()[1]
        pool = Http1Pool(5.0, ssl.create_default_context())
        url = f"http://127.0.0.1:{port}/v1/x"
        first = await pool.post(url, {"x-a": "1"}, b"{}")
        assert first.status_code == 200 and await first.aread() == BODY
        await first.aclose()
        second = await pool.post(url, {}, b"{}")
        assert (second.status_code, second.reason_phrase) == (429, "Too Many")
        assert await second.aread() == b"slow!"
        await second.aclose()
        third = await pool.post(url, {}, b"{}")
        assert await third.aread() == BODY
        await third.aclose()
        assert len(connections) == 1
        await pool.aclose()
        server.close()

    asyncio.run(main())


def test_a_stale_kept_alive_connection_is_replaced_and_close_bodies_end() -> None:
    async def main() -> None:
        ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi"
        closing = b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil eof"
        server, connections = await _server([ok, ok, closing], close_after=True)
        port = server.sockets[0].getsockname()[1]
        pool = Http1Pool(5.0, ssl.create_default_context())
        url = f"http://127.0.0.1:{port}/"
        first = await pool.post(url, {}, b"")
        assert await first.aread() == b"hi"
        await first.aclose()
        await asyncio.sleep(0.05)  # the server closed the connection after one answer
        second = await pool.post(url, {}, b"")
        assert await second.aread() == b"hi"
        await second.aclose()
        third = await pool.post(url, {}, b"")
        assert await third.aread() == b"until eof"
        await third.aclose()
        assert len(connections) == 3
        server.close()
        with pytest.raises(Http1Error) as refused:
            await pool.post("http://127.0.0.1:9/", {}, b"")
        assert not refused.value.connected

    asyncio.run(main())
