"""Calls made in the same event-loop tick, sent as one bulk call (a Ray call costs ~0.9 ms of CPU).

``Coalescer(send)``: ``await coalescer.submit(item)`` returns ``send``'s answer for that item; every
item submitted before the loop next runs its callbacks goes in the same ``send(items)``. A lone call
is a batch of one (no timer, no added wait). If ``send`` raises, every caller in the batch gets it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["Coalescer"]

_I = TypeVar("_I")
_O = TypeVar("_O")


class Coalescer(Generic[_I, _O]):
    """Batches ``submit``s of one loop tick into one ``send``."""

    def __init__(self, send: Callable[[list[_I]], Awaitable[Sequence[_O]]]) -> None:
        self._send = send
        self._pending: list[tuple[_I, asyncio.Future[_O]]] = []
        self._tasks: set[asyncio.Task[None]] = set()

    def submit(self, item: _I) -> asyncio.Future[_O]:
        """Add ``item`` to this tick's batch; the future holds its answer."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_O] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._flush)
        self._pending.append((item, future))
        return future

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        task = asyncio.get_running_loop().create_task(self._deliver(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, batch: list[tuple[_I, asyncio.Future[_O]]]) -> None:
        try:
            answers = await self._send([item for item, _ in batch])
        except BaseException as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        for (_, future), answer in zip(batch, answers, strict=True):
            if not future.done():
                future.set_result(answer)
