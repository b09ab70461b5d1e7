"""Running the app: the listening socket, bound before the model loads (:func:`bind`), and uvicorn on it
(:func:`run`): graceful on SIGTERM and SIGINT (no new connections, the requests in flight answered, the
queued rows run), then back to the caller."""

from __future__ import annotations

import errno
import signal
import socket
import threading
from collections.abc import Callable

import uvicorn
from fastapi import FastAPI

from protoembed.core.errors import ProtoembedError

#: Connections the socket queues while the model loads or the server is busy.
BACKLOG = 2048


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host``:``port`` (``port`` 0: a free one; ``getsockname()`` says which).

    Raises:
        ProtoembedError: one line: the port in use, or the address that cannot be listened on and why.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on connections of a socket that names it, and without
    # it every response waits for the client's delayed ACK (about 40 ms on Linux) before its body is sent
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # not a live listener's port: see bind
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise ProtoembedError(
                f"port {port} on {host} is in use (another server?); stop it or pick another port"
            ) from None
        raise ProtoembedError(f"cannot listen on {host} port {port}: {err.strerror or err}") from None
    return sock


class Server(uvicorn.Server):
    """uvicorn's server, calling ``on_started`` once it serves (after the app's start-up)."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self.on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and not self.should_exit and self.on_started is not None:
            self.on_started()


def make_server(app: FastAPI, on_started: Callable[[], None] | None = None) -> Server:
    """A :class:`Server` for ``app``: uvicorn's logging left to the caller (nothing configured, no access
    log), graceful shutdown without a time limit."""
    config = uvicorn.Config(
        app, log_config=None, access_log=False, lifespan="on", timeout_graceful_shutdown=None
    )
    return Server(config, on_started)


def run(app: FastAPI, sock: socket.socket, on_started: Callable[[], None] | None = None) -> None:
    """Serve ``app`` on ``sock`` until SIGTERM or SIGINT, then shut down gracefully and return.

    uvicorn raises the signal it caught again once it has shut down; for SIGTERM that is a no-op here (the
    process then ends with status 0), SIGINT stays a ``KeyboardInterrupt``.
    """
    server = make_server(app, on_started)
    if threading.current_thread() is not threading.main_thread():  # no signals there
        server.run(sockets=[sock])
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        server.run(sockets=[sock])
    finally:
        signal.signal(signal.SIGTERM, previous)
