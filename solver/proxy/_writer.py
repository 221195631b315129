"""The client side of a stream: one writer task per response, fed without awaiting.

The reader pushes bytes and goes on reading; the writer sends whatever has piled up when it
gets the loop. Upstream events that arrived together (one network read holds many HTTP chunks,
and httpx yields them one by one without suspending) therefore leave in one ``send`` instead of
one syscall each, while a trickling upstream still gets every event out at once. A reader that
never waits (an upstream faster than the proxy) yields at the first bytes and every 32 KiB, so
batching does not delay the first token. Keepalives go through the same queue, so frames never
interleave.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from starlette.types import Send

# Above this many unsent bytes (a slow client), the reader waits for the writer.
HIGH_WATER = 1 << 20
# A reader that never has to wait (the upstream is faster than us) yields to the writer at the
# first bytes (time to first token) and then every this many bytes.
FLUSH_AT = 1 << 15


class StreamWriter:
    def __init__(
        self,
        send: Send,
        headers: list[tuple[bytes, bytes]],
        on_client_gone: Callable[[], None],
    ) -> None:
        self._send = send
        self._headers = headers
        self._on_client_gone = on_client_gone
        self._loop = asyncio.get_running_loop()
        self._pending: list[bytes] = []
        self._size = 0
        self._wake = asyncio.Event()
        self._drained = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self.last_write = self._loop.time()
        self.gone = False

    @property
    def started(self) -> bool:
        return self._task is not None

    @property
    def idle(self) -> bool:
        return not self._pending

    def push(self, data: bytes) -> bool:
        """Queue ``data``; True when the caller should yield so the writer sends now."""
        if data:
            self._pending.append(data)
            self._size += len(data)
        self._wake.set()
        if self._task is None:
            self._task = self._loop.create_task(self._run())
            return True
        return self._size >= FLUSH_AT

    @property
    def pressing(self) -> bool:
        return self._size > HIGH_WATER and not self.gone

    async def backpressure(self) -> None:
        if self.pressing:
            self._drained.clear()
            await self._drained.wait()

    async def close(self, final: bytes) -> None:
        """Send ``final`` as the last bytes of the body and wait until they are out."""
        self._closing = True
        self.push(final)
        assert self._task is not None
        await self._task

    def cancel(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def _run(self) -> None:
        send = self._send
        try:
            headers = [
                (b"content-type", b"text/event-stream"),
                (b"cache-control", b"no-cache"),
                (b"x-accel-buffering", b"no"),
                *self._headers,
            ]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            while True:
                await self._wake.wait()
                self._wake.clear()
                data = b"".join(self._pending) if len(self._pending) != 1 else self._pending[0]
                self._pending.clear()
                self._size = 0
                self._drained.set()
                last = self._closing
                if data or last:
                    await send({"type": "http.response.body", "body": data, "more_body": not last})
                    self.last_write = self._loop.time()
                if last:
                    return
        except OSError:
            # the client went away (uvicorn raises ClientDisconnected, an OSError)
            self.gone = True
            self._drained.set()
            self._on_client_gone()
