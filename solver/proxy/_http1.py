"""A lean HTTP/1.1 client for the upstream leg: keep-alive pool, TLS, chunked bodies.

Why not httpx here: h11 hands over one event per HTTP chunk, and SGLang sends every SSE event
as its own chunk, so a burst of 50 events read in one ``recv`` cost 50 trips through
h11 + httpcore + httpx (measured: about two thirds of the proxy's CPU per event). This client
de-chunks everything one socket read holds in one pass and yields it as one piece, so the SSE
decoder and the emitters run once per read. It does only what an upstream model server needs:
one request per connection at a time, ``POST`` with a body, chunked / length / close-delimited
responses, no redirects, no proxies, no HTTP/2.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

_READ = 1 << 16
_HEAD_LIMIT = 1 << 20
_SIZE, _DATA, _CRLF, _TRAILER, _DONE = range(5)


class Http1Error(Exception):
    """The upstream connection failed or broke the protocol. ``connected`` says whether a
    response had started (a reset mid-body versus a refused connection)."""

    def __init__(self, message: str, *, connected: bool) -> None:
        super().__init__(message)
        self.connected = connected


class Dechunker:
    """Incremental ``Transfer-Encoding: chunked`` decoder: bytes in, body bytes out."""

    __slots__ = ("_buffer", "_left", "_state")

    def __init__(self) -> None:
        self._buffer = b""
        self._left = 0
        self._state = _SIZE

    @property
    def done(self) -> bool:
        return self._state == _DONE

    @property
    def leftover(self) -> bool:
        return bool(self._buffer)

    def feed(self, data: bytes) -> bytes:
        buf = self._buffer + data if self._buffer else data
        out: list[bytes] = []
        pos, end = 0, len(buf)
        while pos < end:
            state = self._state
            if state == _DATA:
                take = min(self._left, end - pos)
                out.append(buf[pos : pos + take])
                pos += take
                self._left -= take
                if not self._left:
                    self._state = _CRLF
            elif state == _CRLF:
                if end - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise Http1Error("malformed chunked body (no CRLF after data)", connected=True)
                pos += 2
                self._state = _SIZE
            elif state in (_SIZE, _TRAILER):
                line_end = buf.find(b"\r\n", pos)
                if line_end < 0:
                    if end - pos > 4096:
                        raise Http1Error("malformed chunked body (size line)", connected=True)
                    break
                line = buf[pos:line_end]
                pos = line_end + 2
                if state == _TRAILER:
                    if not line:
                        self._state = _DONE
                        break
                    continue
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise Http1Error("malformed chunk size", connected=True) from None
                if size:
                    self._left, self._state = size, _DATA
                else:
                    self._state = _TRAILER
            else:
                break
        self._buffer = buf[pos:]
        return out[0] if len(out) == 1 else b"".join(out)


class _Connection:
    __slots__ = ("key", "reader", "reused", "writer")

    def __init__(self, key: tuple[str, str, int], reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:  # fmt: skip
        self.key = key
        self.reader = reader
        self.writer = writer
        self.reused = False

    def close(self) -> None:
        self.writer.close()


class Http1Response:
    def __init__(self, pool: Http1Pool, connection: _Connection, status: int, reason: str,
                 headers: dict[str, str], rest: bytes) -> None:  # fmt: skip
        self.status_code = status
        self.reason_phrase = reason
        self.headers = headers
        self._pool = pool
        self._connection: _Connection | None = connection
        self._rest = rest
        self._complete = False
        encoding = headers.get("transfer-encoding", "").lower()
        self._chunked = "chunked" in encoding
        length = headers.get("content-length")
        self._length = int(length) if length and length.isdigit() and not self._chunked else None
        if status < 200 or status in (204, 304):
            self._length, self._chunked = 0, False
        self._keep = headers.get("connection", "").lower() != "close"

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body, de-chunked, one piece per network read."""
        connection = self._connection
        assert connection is not None, "body already read"
        reader = connection.reader
        first, self._rest = self._rest, b""
        try:
            if self._chunked:
                dechunker = Dechunker()
                data = first or await reader.read(_READ)
                while True:
                    if not data:
                        raise Http1Error("upstream closed the connection mid-body", connected=True)
                    out = dechunker.feed(data)
                    if out:
                        yield out
                    if dechunker.done:
                        self._complete = not dechunker.leftover
                        return
                    data = await reader.read(_READ)
            elif self._length is not None:
                left = self._length
                data = first[:left]
                while True:
                    if data:
                        left -= len(data)
                        yield data
                    if left <= 0:
                        self._complete = True
                        return
                    data = await reader.read(min(_READ, left))
                    if not data:
                        raise Http1Error("upstream closed the connection mid-body", connected=True)
            else:
                self._keep = False
                if first:
                    yield first
                while data := await reader.read(_READ):
                    yield data
                self._complete = True
        except (ConnectionError, OSError) as exc:
            raise Http1Error(f"upstream connection failed mid-body: {exc}", connected=True) from exc

    async def aread(self, limit: int = 1 << 26) -> bytes:
        body = b""
        async for piece in self.aiter_raw():
            body += piece
            if len(body) > limit:
                break
        return body

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if self._complete and self._keep:
            self._pool.release(connection)
        else:
            connection.close()


class Http1Pool:
    """Idle keep-alive connections per (scheme, host, port)."""

    def __init__(self, connect_timeout: float, tls: ssl.SSLContext, max_idle: int = 64) -> None:
        self._connect_timeout = connect_timeout
        self._tls = tls
        self._max_idle = max_idle
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}

    def release(self, connection: _Connection) -> None:
        idle = self._idle.setdefault(connection.key, [])
        if len(idle) < self._max_idle and not connection.reader.at_eof():
            connection.reused = True
            idle.append(connection)
        else:
            connection.close()

    async def _connect(self, key: tuple[str, str, int]) -> _Connection:
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            if not connection.reader.at_eof() and not connection.writer.is_closing():
                return connection
            connection.close()
        scheme, host, port = key
        try:
            async with asyncio.timeout(self._connect_timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=self._tls if scheme == "https" else None, limit=_HEAD_LIMIT
                )
        except TimeoutError:
            raise Http1Error(f"connect to {host}:{port} timed out", connected=False) from None
        except (OSError, ssl.SSLError) as exc:
            raise Http1Error(f"cannot connect to {host}:{port}: {exc}", connected=False) from None
        return _Connection(key, reader, writer)

    async def post(self, url: str, headers: dict[str, str], body: bytes) -> Http1Response:
        parts = urlsplit(url)
        scheme = parts.scheme
        host = parts.hostname or ""
        port = parts.port or (443 if scheme == "https" else 80)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        netloc = host if parts.port is None else f"{host}:{port}"
        head = [f"POST {target} HTTP/1.1", f"host: {netloc}", f"content-length: {len(body)}"]
        head += [f"{name}: {value}" for name, value in headers.items()]
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        key = (scheme, host, port)
        for attempt in range(2):
            connection = await self._connect(key)
            try:
                connection.writer.write(request)
                raw = await connection.reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
                connection.close()
                if connection.reused and attempt == 0:
                    continue  # a kept-alive connection the server had closed: once more, fresh
                raise Http1Error(
                    f"upstream closed the connection: {exc}", connected=False
                ) from None
            except asyncio.LimitOverrunError:
                connection.close()
                raise Http1Error("upstream response head too large", connected=True) from None
            return self._response(connection, raw)
        raise AssertionError("unreachable")

    def _response(self, connection: _Connection, raw: bytes) -> Http1Response:
        lines = raw[:-4].decode("latin-1").split("\r\n")
        status_line = lines[0].split(" ", 2)
        if len(status_line) < 2 or not status_line[0].startswith("HTTP/") or \
                not status_line[1].isdigit():  # fmt: skip
            connection.close()
            raise Http1Error(f"not an HTTP response: {lines[0][:80]!r}", connected=True)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                continue
            name = name.strip().lower()
            value = value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        reason = status_line[2] if len(status_line) > 2 else ""
        return Http1Response(self, connection, int(status_line[1]), reason, headers, b"")

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()
