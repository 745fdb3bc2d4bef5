"""Where the backend suite's test doubles keep what they saw: a ``Board`` of lists and gates.

On the local backend a model or a tool runs in the test's own process, so a ``Script``'s log, a
``Gate`` and a tool's list of runs live in this process: the ``LocalBoard``. A backend that runs
models and tools in other processes (Ray's session hosts) works on unpickled copies of the agents,
so what the test reads afterwards must live where both processes reach it: a board the fixture
supplies (``RuntimeFactory(board=...)``; the repository's Ray fixture uses a named Ray actor), which
this package cannot name (it imports no backend).

Every double keeps its state under a key on the *active board*: the one switched in with
``use_board`` (the factory does it for its test), else the one a double brought along into this
process, else this process's ``LocalBoard``. A double pickled while a board is switched in carries
that board (``carried_board``) and, unpickled in a process that has none switched in (a backend's
host), makes it that process's board (``adopt_board``). So the doubles never know which board they
talk to, and the suite runs unchanged on any backend.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any, Protocol

__all__ = ["Board", "LocalBoard", "active_board", "adopt_board", "carried_board", "use_board"]


class Board(Protocol):
    """Lists and gates shared by the test and the processes its models and tools run in."""

    def append(self, key: str, item: Any) -> None:
        """Append ``item`` to the list ``key``."""
        ...

    def items(self, key: str) -> list[Any]:
        """A copy of the list ``key`` (empty if there is none)."""
        ...

    def clear(self, key: str) -> None:
        """Empty the list ``key``."""
        ...

    def put(self, key: str, value: Any) -> None:
        """Set the value ``key``."""
        ...

    def reset(self) -> None:
        """Forget everything: a new test starts from an empty board."""
        ...

    def pop(self, key: str) -> Any:
        """Take the value ``key`` away (``None`` if unset)."""
        ...

    async def pop_async(self, key: str) -> Any:
        """``pop`` from a model or tool (in the event loop of whichever process runs it)."""
        ...

    async def append_async(self, key: str, item: Any) -> None:
        """``append`` from a model or tool."""
        ...

    async def enter(self, gate: str) -> None:
        """Mark ``gate`` reached, then wait until it is released."""
        ...

    async def reached(self, gate: str) -> None:
        """Wait until a caller holds at ``gate``."""
        ...

    def is_reached(self, gate: str) -> bool:
        """Whether a caller reached ``gate``."""
        ...

    def release(self, gate: str) -> None:
        """Let whoever holds at ``gate`` (and whoever comes later) go on."""
        ...


class _Gates:
    """Two events per gate: reached (a request is held) and open (the test let it go)."""

    def __init__(self) -> None:
        self._events: dict[str, tuple[asyncio.Event, asyncio.Event]] = {}

    def __call__(self, gate: str) -> tuple[asyncio.Event, asyncio.Event]:
        if gate not in self._events:
            self._events[gate] = (asyncio.Event(), asyncio.Event())
        return self._events[gate]


class LocalBoard:
    """The board of one process: enough when the backend runs models and tools where the test runs."""

    def __init__(self) -> None:
        self._lists: dict[str, list[Any]] = {}
        self._values: dict[str, Any] = {}
        self._gates = _Gates()

    def append(self, key: str, item: Any) -> None:
        """Append ``item`` to the list ``key``."""
        self._lists.setdefault(key, []).append(item)

    def items(self, key: str) -> list[Any]:
        """A copy of the list ``key``."""
        return list(self._lists.get(key, ()))

    def clear(self, key: str) -> None:
        """Empty the list ``key``."""
        self._lists.pop(key, None)

    def put(self, key: str, value: Any) -> None:
        """Set the value ``key``."""
        self._values[key] = value

    def reset(self) -> None:
        """Forget everything (a new test starts from an empty board)."""
        self._lists.clear()
        self._values.clear()
        self._gates = _Gates()

    def pop(self, key: str) -> Any:
        """Take the value ``key`` away."""
        return self._values.pop(key, None)

    async def pop_async(self, key: str) -> Any:
        """``pop``, awaitable."""
        return self.pop(key)

    async def append_async(self, key: str, item: Any) -> None:
        """``append``, awaitable."""
        self.append(key, item)

    async def enter(self, gate: str) -> None:
        """Mark ``gate`` reached and wait for its release."""
        entered, opened = self._gates(gate)
        entered.set()
        await opened.wait()

    async def reached(self, gate: str) -> None:
        """Wait until ``gate`` is reached."""
        await self._gates(gate)[0].wait()

    def is_reached(self, gate: str) -> bool:
        """Whether ``gate`` was reached."""
        return self._gates(gate)[0].is_set()

    def release(self, gate: str) -> None:
        """Open ``gate``."""
        self._gates(gate)[1].set()


_local = LocalBoard()
_active: list[Board] = []
_adopted: list[Board] = []


def active_board() -> Board:
    """The board the doubles use now: the switched-in one, else an adopted one, else this process's."""
    if _active:
        return _active[-1]
    if _adopted:
        return _adopted[-1]
    return _local


def carried_board() -> Board | None:
    """The board a double pickled now takes along: the active one, unless it is this process's own."""
    board = active_board()
    return None if isinstance(board, LocalBoard) else board


def adopt_board(board: Board) -> None:
    """Make ``board`` this process's board (a double brought it here), unless one is switched in.

    A process with a board switched in (the test's own) keeps it: only a backend's host process,
    which never switches one in, adopts the board of the doubles it receives.
    """
    if not _active:
        _adopted[:] = [board]


@contextlib.contextmanager
def use_board(board: Board) -> Iterator[Board]:
    """Make ``board`` the active one for the ``with`` block (``RuntimeFactory`` does it for its test)."""
    _active.append(board)
    try:
        yield board
    finally:
        _active.remove(board)
