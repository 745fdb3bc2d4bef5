"""Connection deadlines uvicorn lacks: a request's head and its body must arrive in time (no slowloris).

uvicorn closes a connection left idle after a response (``timeout_keep_alive``), but nothing else:
a client that connects and sends nothing, or sends a request head one byte a minute, or a body
that never ends, holds a connection (and its buffers) for as long as it likes, and enough of them
exhaust the server's sockets for every tenant. ``http_protocol(limits)`` is uvicorn's own h11
protocol with two more timers, passed to ``uvicorn.Config(http=...)``:

- the head: from the moment a connection opens, or from the first byte of a later request on a
  kept-alive connection, the whole request head must arrive within ``header_timeout_s``; else the
  client gets ``408 Request Timeout`` and the connection is closed (nothing was started for it);
- the body: once the head is in, the whole body must arrive within ``body_timeout_s``; else the
  connection is closed, and the app reading it sees the client gone (``http.disconnect``);
- idle: between requests, uvicorn's keep-alive timer closes the connection after ``keep_alive_s``.

A response may take as long as it needs (a run's stream lasts hours): the timers watch only what
the client sends. The protocol is h11 whatever is installed: httptools would need a twin of this
class, and the server's hot path is the runtime, not the parser.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar, Literal

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from repertory.http.limits import DEFAULT_LIMITS, ServerLimits

__all__ = ["DeadlineProtocol", "http_protocol"]

_TIMEOUT_408 = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
    b"content-length: 32\r\n\r\nthe request head came too slowly"
)
Waiting = Literal["head", "body"]


class DeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request head or body does not arrive in time."""

    limits: ClassVar[ServerLimits] = DEFAULT_LIMITS

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        # uvicorn's own idle timer, in seconds that need not be whole.
        self.timeout_keep_alive = self.limits.keep_alive_s  # type: ignore[assignment]
        self._timer: asyncio.TimerHandle | None = None
        self._waiting: Waiting | None = None

    # -- the asyncio.Protocol calls uvicorn's protocol answers, each followed by a look at the state

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """A new connection: its first request head is due within the header timeout."""
        super().connection_made(transport)
        self._arm("head")

    def data_received(self, data: bytes) -> None:
        """Bytes in: a head still partial keeps its deadline, a complete one starts the body's."""
        super().data_received(data)
        self._follow(partial=True)

    def on_response_complete(self) -> None:
        """A response sent: idle until the next request (uvicorn's keep-alive), unless one is half in."""
        super().on_response_complete()
        self._follow(partial=bool(self.conn.trailing_data[0]))

    def connection_lost(self, exc: Exception | None) -> None:
        """The connection is gone: no timer outlives it."""
        self._disarm()
        super().connection_lost(exc)

    # -- the timers ---------------------------------------------------------------------------------

    def _follow(self, *, partial: bool) -> None:
        """Set the timer for what the client owes now (``partial``: bytes of a request head are buffered)."""
        state = self.conn.their_state
        if self.transport.is_closing() or self.transport.get_protocol() is not self:
            self._disarm()  # closed, or handed to a WebSocket protocol
        elif state is h11.IDLE:
            if partial:
                self._arm("head")
            else:
                self._disarm()  # between requests: uvicorn's keep-alive timer closes an idle connection
        elif state is h11.SEND_BODY:
            self._arm("body")
        else:
            self._disarm()

    def _arm(self, waiting: Waiting) -> None:
        if self._waiting == waiting:
            return  # the deadline runs from when the client started owing this, not from its last byte
        self._disarm()
        delay = self.limits.header_timeout_s if waiting == "head" else self.limits.body_timeout_s
        self._waiting = waiting
        self._timer = self.loop.call_later(delay, self._expired, waiting)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._waiting = None, None

    def _expired(self, waiting: Waiting) -> None:
        self._timer, self._waiting = None, None
        if self.transport.is_closing():
            return
        if waiting == "head":
            self.transport.write(_TIMEOUT_408)  # no response was started: say why before closing
        self.transport.close()


def http_protocol(limits: ServerLimits) -> type[DeadlineProtocol]:
    """The protocol class to pass as ``uvicorn.Config(http=...)`` for ``limits``' three timeouts."""
    return type("DeadlineProtocol", (DeadlineProtocol,), {"limits": limits, "__doc__": DeadlineProtocol.__doc__})
