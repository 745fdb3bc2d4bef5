"""Where the handle suite's test doubles keep what they saw: in this process, or in a Ray actor.

On the local backend a model or a tool runs in the test's own process, so a ``Script``'s log, a
``Gate`` and a tool's list of runs are plain in-process objects. On the Ray backend they run in a
session host (another process) working on an unpickled copy of the agent, so whatever the test reads
afterwards must live where both processes reach it: one named, detached Ray actor (``RayBoard``).

Every double keeps its state under a key on the *active board*: ``LocalBoard`` by default, the
``RayBoard`` while a Ray-backed handle test runs (the ``make_runtime`` fixture switches it), and, in a
Ray worker process, always the ``RayBoard`` (it is looked up by name on first use). The doubles
never know which one they talk to; that is what lets the handle tests run unchanged on both backends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any, Protocol

__all__ = ["BOARD_NAME", "BOARD_NAMESPACE", "Board", "LocalBoard", "RayBoard", "active_board", "use_board"]

BOARD_NAME = "handles-board"
BOARD_NAMESPACE = "repertory-tests"


class Board(Protocol):
    """Lists and gates shared by the test and the processes its models and tools run in."""

    def append(self, key: str, item: Any) -> None: ...
    def items(self, key: str) -> list[Any]: ...
    def clear(self, key: str) -> None: ...
    def put(self, key: str, value: Any) -> None: ...
    def reset(self) -> None: ...
    def pop(self, key: str) -> Any: ...
    async def pop_async(self, key: str) -> Any: ...
    async def append_async(self, key: str, item: Any) -> None: ...
    async def enter(self, gate: str) -> None: ...
    async def reached(self, gate: str) -> None: ...
    def is_reached(self, gate: str) -> bool: ...
    def release(self, gate: str) -> None: ...


class _Gates:
    """Two events per gate: reached (a request is held) and open (the test let it go)."""

    def __init__(self) -> None:
        self._events: dict[str, tuple[asyncio.Event, asyncio.Event]] = {}

    def __call__(self, gate: str) -> tuple[asyncio.Event, asyncio.Event]:
        if gate not in self._events:
            self._events[gate] = (asyncio.Event(), asyncio.Event())
        return self._events[gate]


class LocalBoard:
    """The board of one process: the local backend runs models and tools where the test runs."""

    def __init__(self) -> None:
        self._lists: dict[str, list[Any]] = {}
        self._values: dict[str, Any] = {}
        self._gates = _Gates()

    def append(self, key: str, item: Any) -> None:
        self._lists.setdefault(key, []).append(item)

    def items(self, key: str) -> list[Any]:
        return list(self._lists.get(key, ()))

    def clear(self, key: str) -> None:
        self._lists.pop(key, None)

    def put(self, key: str, value: Any) -> None:
        self._values[key] = value

    def reset(self) -> None:
        """Forget everything (a new test starts from an empty board)."""
        self._lists.clear()
        self._values.clear()
        self._gates = _Gates()

    def pop(self, key: str) -> Any:
        return self._values.pop(key, None)

    async def pop_async(self, key: str) -> Any:
        return self.pop(key)

    async def append_async(self, key: str, item: Any) -> None:
        self.append(key, item)

    async def enter(self, gate: str) -> None:
        entered, opened = self._gates(gate)
        entered.set()
        await opened.wait()

    async def reached(self, gate: str) -> None:
        await self._gates(gate)[0].wait()

    def is_reached(self, gate: str) -> bool:
        return self._gates(gate)[0].is_set()

    def release(self, gate: str) -> None:
        self._gates(gate)[1].set()


class _BoardActor:
    """The Ray actor behind ``RayBoard``: a ``LocalBoard`` served to every process (async actor)."""

    def __init__(self) -> None:
        self._board = LocalBoard()

    async def append(self, key: str, item: Any) -> None:
        self._board.append(key, item)

    async def items(self, key: str) -> list[Any]:
        return self._board.items(key)

    async def clear(self, key: str) -> None:
        self._board.clear(key)

    async def put(self, key: str, value: Any) -> None:
        self._board.put(key, value)

    async def pop(self, key: str) -> Any:
        return self._board.pop(key)

    async def reset(self) -> None:
        self._board.reset()

    async def enter(self, gate: str) -> None:
        await self._board.enter(gate)

    async def reached(self, gate: str) -> None:
        await self._board.reached(gate)

    async def is_reached(self, gate: str) -> bool:
        return self._board.is_reached(gate)

    async def release(self, gate: str) -> None:
        self._board.release(gate)


class RayBoard:
    """A proxy to the named board actor; sync methods block on ``ray.get`` (short calls, test code only)."""

    def __init__(self, actor: Any) -> None:
        self._actor = actor

    @classmethod
    def connect(cls) -> RayBoard:
        """Find the board actor, creating it the first time (detached: it serves the whole test session)."""
        import ray

        actor_class = ray.remote(_BoardActor)
        actor = actor_class.options(
            name=BOARD_NAME,
            namespace=BOARD_NAMESPACE,
            lifetime="detached",
            get_if_exists=True,
            num_cpus=0,
            max_concurrency=10_000,
        ).remote()
        return cls(actor)

    def kill(self) -> None:
        """Stop the board actor (what the test session started, it stops)."""
        import ray

        ray.kill(self._actor)

    def _get(self, ref: Any) -> Any:
        import ray

        return ray.get(ref, timeout=30)

    def append(self, key: str, item: Any) -> None:
        self._get(self._actor.append.remote(key, item))

    def items(self, key: str) -> list[Any]:
        result: list[Any] = self._get(self._actor.items.remote(key))
        return result

    def clear(self, key: str) -> None:
        self._get(self._actor.clear.remote(key))

    def put(self, key: str, value: Any) -> None:
        self._get(self._actor.put.remote(key, value))

    def pop(self, key: str) -> Any:
        return self._get(self._actor.pop.remote(key))

    def reset(self) -> None:
        self._get(self._actor.reset.remote())

    async def pop_async(self, key: str) -> Any:
        return await self._actor.pop.remote(key)

    async def append_async(self, key: str, item: Any) -> None:
        await self._actor.append.remote(key, item)

    async def enter(self, gate: str) -> None:
        await self._actor.enter.remote(gate)

    async def reached(self, gate: str) -> None:
        await self._actor.reached.remote(gate)

    def is_reached(self, gate: str) -> bool:
        return bool(self._get(self._actor.is_reached.remote(gate)))

    def release(self, gate: str) -> None:
        self._get(self._actor.release.remote(gate))


_local = LocalBoard()
_active: list[Board] = []


def _in_ray_worker() -> bool:
    try:
        import ray
    except ImportError:
        return False
    worker = ray._private.worker.global_worker
    return bool(ray.is_initialized() and worker.mode == ray.WORKER_MODE)


def active_board() -> Board:
    """The board doubles use now: the switched-in one, a Ray worker's ``RayBoard``, else this process's."""
    if _active:
        return _active[-1]
    if _in_ray_worker():
        _active.append(RayBoard.connect())
        return _active[-1]
    return _local


@contextlib.contextmanager
def use_board(board: Board) -> Iterator[Board]:
    """Make ``board`` the active one for the ``with`` block (the Ray handle fixture uses it)."""
    _active.append(board)
    try:
        yield board
    finally:
        _active.remove(board)
