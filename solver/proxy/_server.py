"""Running the app on uvicorn: in the foreground (the CLI) or in a background thread (tests,
benchmarks, embedding)."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
from types import TracebackType
from typing import TextIO

import uvicorn
from starlette.applications import Starlette

from ._app import build_app
from ._config import ProxyConfig, check_binding
from ._state import ProxyState


def _uvicorn_config(app: Starlette, host: str, port: int) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_keep_alive=75,
        # no server-side timeouts on responses: the proxy's own deadlines decide
    )


def serve(config: ProxyConfig, *, quiet: bool = False) -> None:
    """Serve until interrupted (Ctrl-C / SIGTERM), one line per request on stderr unless
    ``quiet``."""
    check_binding(config)
    app = build_app(config)
    state: ProxyState = app.state.proxy
    state.request_log = None if quiet else sys.stderr
    uvicorn.Server(_uvicorn_config(app, config.host, config.port)).run()


class ProxyServer:
    """The proxy on a free (or given) port in a daemon thread; ``url`` once entered."""

    def __init__(self, config: ProxyConfig, *, request_log: TextIO | None = None) -> None:
        """``request_log``: where the one line per request goes (nowhere by default)."""
        check_binding(config)
        self.config = config
        # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on sockets that say so, and
        # without it every small SSE write waits for a delayed ACK (40 ms)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((config.host, config.port))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://{config.host}:{self.port}"
        self.app = build_app(config)
        self.state: ProxyState = self.app.state.proxy
        self.state.request_log = request_log
        self._server = uvicorn.Server(_uvicorn_config(self.app, config.host, self.port))
        self._thread = threading.Thread(target=self._run, name="proxy-server", daemon=True)

    def _run(self) -> None:
        asyncio.run(self._server.serve(sockets=[self._sock]))

    def __enter__(self) -> ProxyServer:
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the proxy server failed to start")
            self._thread.join(0.01)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self._sock.close()
