"""Small reactive primitives: ``AbortSignal`` to stop a drive, ``Signal`` to watch a value."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from typing import Generic, TypeVar

__all__ = ["AbortSignal", "Signal"]

T = TypeVar("T")


class AbortSignal:
    """Abort a ``start()``/``resume()`` in progress: the run commits ``cancelled``, then ``RunCancelled``.

    Like the web's ``AbortController.signal``: create one, pass it in, call ``abort()`` from anywhere
    in the same event loop.
    """

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None
        self._aborted = False
        self._tasks: set[asyncio.Task[object]] = set()
        self.reason: str | None = None

    @property
    def aborted(self) -> bool:
        """True once ``abort()`` was called."""
        return self._aborted

    def abort(self, reason: str | None = None) -> None:
        """Request the abort; idempotent."""
        if self._aborted:
            return
        self._aborted = True
        self.reason = reason
        if self._event is not None:
            self._event.set()
        # Drives waiting on a model or a tool stop at once: their tasks are cancelled, and the
        # drive turns that cancellation into a committed ``cancelled`` checkpoint.
        for task in list(self._tasks):
            task.cancel("aborted")

    def bind(self, task: asyncio.Task[object]) -> None:
        """Cancel ``task`` on ``abort()`` until ``unbind(task)``.

        The step loop binds the task driving a run, so an abort stops a model call or a tool at
        once instead of at the next checkpoint.
        """
        self._tasks.add(task)

    def unbind(self, task: asyncio.Task[object]) -> None:
        """Stop cancelling ``task`` on abort (a no-op if it was not bound)."""
        self._tasks.discard(task)

    async def wait(self) -> None:
        """Return once aborted."""
        if self._event is None:
            self._event = asyncio.Event()
            if self._aborted:
                self._event.set()
        await self._event.wait()


class Signal(Generic[T]):
    """A readable, subscribable value: ``value``, ``subscribe(fn) -> unsubscribe``, ``async for``.

    ``async for`` yields the current value, then every later value in order (none is skipped,
    each iterator has its own queue); it ends only when the caller stops iterating.
    """

    def __init__(self, value: T) -> None:
        self._value = value
        # Made on first use: most signals (one per session) are never watched.
        self._subscribers: list[Callable[[T], None]] | None = None
        self._queues: list[asyncio.Queue[T]] | None = None

    @property
    def value(self) -> T:
        """The latest value."""
        return self._value

    @property
    def watched(self) -> bool:
        """True while a subscriber or an iterator listens."""
        return bool(self._subscribers or self._queues)

    def set(self, value: T) -> None:
        """Publish a new value to subscribers and iterators."""
        self._value = value
        for fn in list(self._subscribers or ()):
            fn(value)
        for queue in self._queues or ():
            queue.put_nowait(value)

    def subscribe(self, fn: Callable[[T], None]) -> Callable[[], None]:
        """Call ``fn`` on every change; returns a function that unsubscribes."""
        if self._subscribers is None:
            self._subscribers = []
        subscribers = self._subscribers
        subscribers.append(fn)

        def unsubscribe() -> None:
            if fn in subscribers:
                subscribers.remove(fn)

        return unsubscribe

    async def __aiter__(self) -> AsyncGenerator[T, None]:
        queue: asyncio.Queue[T] = asyncio.Queue()
        if self._queues is None:
            self._queues = []
        queues = self._queues
        queues.append(queue)
        try:
            yield self._value
            while True:
                yield await queue.get()
        finally:
            queues.remove(queue)
