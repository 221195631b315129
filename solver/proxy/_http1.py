"""The upstream HTTP/1.1 leg: a keep-alive pool over httptools (llhttp), TLS, streamed bodies.

Why not httpx here: h11 hands over one event per HTTP chunk, and SGLang sends every SSE event
as its own chunk, so a burst of 50 events read in one ``recv`` cost 50 trips through
h11 + httpcore + httpx (measured: about two thirds of the proxy's CPU per event). Here llhttp,
Node's parser, frames the response (interim 1xx answers, Content-Length, chunked) and every
body byte one socket read holds leaves as one piece, so the SSE decoder and the emitters run
once per read. It does only what an upstream model server needs: one request per connection
at a time, ``POST`` with a body, no redirects, no proxies, no HTTP/2.

What keeps one client's answer from reaching another:

- a connection goes back to the pool only when its response ended exactly at its framing:
  any byte past the end (a body longer than its Content-Length), or arriving while the
  connection is idle, closes it;
- a released connection is offered again only after the event loop has read the socket
  once more, so bytes that were already on their way are seen first;
- a request is re-sent only on a kept-alive connection known to have closed before the
  request was written; once written, a failure is the caller's to handle (a ``POST`` to a
  model is not idempotent: it costs a generation).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import AsyncIterator
from typing import cast
from urllib.parse import urlsplit

import httptools

from solver.errors import EndpointUnavailable

_HEAD_LIMIT = 1 << 20  # bytes of status line and headers, interim answers included
_HIGH_WATER = 1 << 20  # unread body bytes above which the socket stops being read
# Seconds a connection may idle in the pool. A server closing an idle connection races a new
# request on it, and a written request is never sent again, so the pool lets go first: local
# model servers run uvicorn, which closes after 5 s; for a hosted API over TLS a fresh
# handshake adds its round trips to the time to first token, so its connections are kept
# longer (a server that closes one sooner sends a FIN, which retires it while it idles).
_IDLE_MAX = {"http": 4.0, "https": 30.0}
_MAX_IDLE = 64


class Http1Error(EndpointUnavailable):
    """The upstream connection failed or broke the protocol. ``connected`` says whether a
    response had started (a reset mid-body versus a refused connection)."""

    def __init__(self, message: str, *, connected: bool) -> None:
        super().__init__(message)
        self.connected = connected


class _Connection(asyncio.Protocol):
    """One upstream socket and its parser; bytes go to the response in flight, if any."""

    def __init__(self, pool: Http1Pool, key: tuple[str, str, int]) -> None:
        self.key = key
        self._pool = pool
        self._loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.response: Http1Response | None = None
        self.closed = False
        self.reused = False
        self.idle_since = 0.0

    # asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport (uvloop's is not an asyncio.Transport subclass, hence no check)
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        response = self.response
        if response is None:
            self.close()  # bytes nobody asked for: this connection can never be trusted again
            return
        response.received(data)

    def eof_received(self) -> bool | None:
        self.closed = True
        if self.response is not None:
            self.response.ended(None)
        return None  # let the transport close

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.response is not None:
            self.response.ended(exc)

    # used by the pool and the response

    @property
    def usable(self) -> bool:
        transport = self.transport
        return not self.closed and transport is not None and not transport.is_closing()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def pause(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()

    def resume(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()


class Http1Response:
    """One response: its head once :meth:`Http1Pool.post` returns, then its body as read."""

    def __init__(self, pool: Http1Pool, connection: _Connection) -> None:
        self._pool = pool
        self._connection: _Connection | None = connection
        self._parser = httptools.HttpResponseParser(self)
        self.status_code = 0
        self.reason_phrase = ""
        self.headers: dict[str, str] = {}
        self.interim: list[int] = []  # the 1xx answers that came before this one
        self._head = asyncio.get_running_loop().create_future()
        self._head_bytes = 0
        self._head_done = False
        self._complete = False
        self._extra = False  # bytes arrived past the end of the response
        self._eof_delimited = False
        self._keep_alive = False
        self._started = False  # any response byte arrived
        self._pieces: deque[bytes] = deque()
        self._body: list[bytes] = []
        self._queued = 0
        self._paused = False
        self._error: Http1Error | None = None
        self._refusal = ""
        self._wake: asyncio.Future[None] | None = None

    # ------------------------------------------------------------ parser callbacks

    def on_message_begin(self) -> None:
        if self._complete:
            self._extra = True

    def on_status(self, status: bytes) -> None:
        self.reason_phrase = status.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._complete:
            return
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1").strip()
        headers = self.headers
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def on_headers_complete(self) -> None:
        if self._complete:
            return
        status = self._parser.get_status_code()
        if 100 <= status < 200:
            if status == 101:
                self._refusal = "upstream switched protocols (101) unasked"
                raise _Refuse(self._refusal)
            self.interim.append(status)  # 100 Continue, 103 Early Hints: the answer follows
            self.headers = {}
            self.reason_phrase = ""
            return
        self.status_code = status
        self._head_done = True
        self._keep_alive = self._parser.should_keep_alive()  # llhttp forgets it at the end
        encoding = self.headers.get("transfer-encoding")
        self._eof_delimited = "content-length" not in self.headers and (
            encoding is None or "chunked" not in encoding.lower()
        )

    def on_body(self, body: bytes) -> None:
        if not self._complete:
            self._body.append(body)

    def on_message_complete(self) -> None:
        if self._head_done and not self._complete:
            self._complete = True

    # ------------------------------------------------------------ bytes in

    def received(self, data: bytes) -> None:
        self._started = True
        if self._error is not None:
            return
        if self._complete:
            self._extra = True
            return
        if not self._head_done:
            self._head_bytes += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail("upstream switched protocols unasked")
            return
        except httptools.HttpParserError as exc:
            if self._refusal:
                self._fail(self._refusal)
                return
            if not self._complete:
                self._fail(f"malformed upstream response: {_reason(exc)}")
                return
            self._extra = True  # the answer is whole; what follows it is not ours
        if self._extra and self._connection is not None:
            self._connection.close()
        if not self._head_done and self._head_bytes > _HEAD_LIMIT:
            self._fail("upstream response head too large")
            return
        if self._body:
            piece = self._body[0] if len(self._body) == 1 else b"".join(self._body)
            self._body.clear()
            self._pieces.append(piece)
            self._queued += len(piece)
            if self._queued > _HIGH_WATER and not self._paused and self._connection is not None:
                self._paused = True
                self._connection.pause()
        if self._head_done and not self._head.done():
            self._head.set_result(None)
        self._notify()

    def ended(self, exc: Exception | None) -> None:
        """The connection closed (``exc`` None for a clean EOF)."""
        if self._complete or self._error is not None:
            self._notify()
            return
        if self._head_done and self._eof_delimited:
            self._complete = True  # a body without length or chunks ends at EOF
            self._notify()
            return
        detail = f": {exc}" if exc is not None else ""
        if self._head_done:
            self._fail(f"upstream closed the connection mid-body{detail}")
        else:
            self._fail(f"upstream closed the connection before answering{detail}")

    def _fail(self, message: str) -> None:
        self._error = Http1Error(message, connected=self._started)
        if self._connection is not None:
            self._connection.close()
        if not self._head.done():
            self._head.set_result(None)
        self._notify()

    def _notify(self) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def _wait(self) -> None:
        self._wake = asyncio.get_running_loop().create_future()
        try:
            await self._wake
        finally:
            self._wake = None

    # ------------------------------------------------------------ the caller's side

    async def head(self) -> None:
        await self._head
        if self._error is not None and not self._head_done:
            raise self._error

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body, de-chunked, one piece per network read."""
        pieces = self._pieces
        while True:
            while pieces:
                piece = pieces.popleft()
                self._queued -= len(piece)
                if self._paused and self._queued <= _HIGH_WATER // 2:
                    self._paused = False
                    if self._connection is not None:
                        self._connection.resume()
                yield piece
            if self._complete:
                return
            if self._error is not None:
                raise self._error
            await self._wait()

    async def aread(self, limit: int = 1 << 26) -> bytes:
        body: list[bytes] = []
        size = 0
        async for piece in self.aiter_raw():
            body.append(piece)
            size += len(piece)
            if size > limit:
                break
        return b"".join(body)

    @property
    def reusable(self) -> bool:
        return (
            self._complete
            and not self._extra
            and not self._eof_delimited
            and self._error is None
            and self._keep_alive
        )

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        connection.response = None
        if self.reusable and connection.usable:
            self._pool.release(connection)
        else:
            connection.close()


class _Refuse(Exception):
    """Raised inside a parser callback to stop parsing (llhttp reports it as a callback
    error; the reason is kept in ``Http1Response._refusal``)."""


def _reason(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text[:120]


class Http1Pool:
    """Idle keep-alive connections per (scheme, host, port)."""

    def __init__(
        self, connect_timeout: float, tls: ssl.SSLContext, max_idle: int = _MAX_IDLE
    ) -> None:
        self._connect_timeout = connect_timeout
        self._tls = tls
        self._max_idle = max_idle
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._closed = False

    def release(self, connection: _Connection) -> None:
        """Back to the pool, after the loop has read the socket once more: two hops through
        the ready queue put one I/O poll between the response's end and its reuse."""
        loop = asyncio.get_running_loop()
        loop.call_soon(loop.call_soon, self._park, connection)

    def _park(self, connection: _Connection) -> None:
        idle = self._idle.setdefault(connection.key, [])
        if self._closed or len(idle) >= self._max_idle or not connection.usable:
            connection.close()
            return
        connection.reused = True
        connection.idle_since = asyncio.get_running_loop().time()
        idle.append(connection)

    def _take_idle(self, key: tuple[str, str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        now = asyncio.get_running_loop().time()
        longest = _IDLE_MAX.get(key[0], 4.0)
        while idle:
            connection = idle.pop()
            if connection.usable and now - connection.idle_since < longest:
                return connection
            connection.close()
        return None

    async def _connect(self, key: tuple[str, str, int]) -> _Connection:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, connection = await loop.create_connection(
                    lambda: _Connection(self, key),
                    host,
                    port,
                    ssl=self._tls if scheme == "https" else None,
                )
        except TimeoutError:
            raise Http1Error(f"connect to {host}:{port} timed out", connected=False) from None
        except (OSError, ssl.SSLError) as exc:
            raise Http1Error(f"cannot connect to {host}:{port}: {exc}", connected=False) from None
        return connection

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
        connection = self._take_idle(key) or await self._connect(key)
        if not connection.usable:
            # died between the pool's check and now, before a byte was written: a fresh one
            connection.close()
            connection = await self._connect(key)
        response = Http1Response(self, connection)
        connection.response = response
        assert connection.transport is not None
        connection.transport.write(request)
        try:
            await response.head()
        except BaseException:
            await response.aclose()
            raise
        return response

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()
