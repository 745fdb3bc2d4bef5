"""The Ray board: where the backend suite's doubles keep their state while the Ray backend runs it.

On the Ray backend models and tools run in a session host (another process) on an unpickled copy
of the agent, so what the test reads afterwards must live where both processes reach it: one named,
detached Ray actor. ``RaySqlite`` (``backends.py``) gives the suite's ``RuntimeFactory`` a
``RayBoard``; the doubles pickled into a host take it along and use it there
(``repertory.testing.conformance.backend.board``).
"""

from __future__ import annotations

from typing import Any

from repertory.testing.conformance.backend.board import LocalBoard

__all__ = ["BOARD_NAME", "BOARD_NAMESPACE", "RayBoard"]

BOARD_NAME = "handles-board"
BOARD_NAMESPACE = "repertory-tests"


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
