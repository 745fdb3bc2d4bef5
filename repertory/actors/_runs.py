"""``handle.run()`` on Ray: runs queued in batches, results delivered on the client's event channel.

A Ray call costs each side about half a millisecond of CPU (measured: ~0.46 ms in the actor, ~0.43
ms in the caller, for an empty call), more than a whole turn's own work in the host (~0.6 ms). So
concurrent ``run()``s are not one call each: the runs a client starts within one event-loop tick
are queued on their host by one ``run_turns`` call, and each result comes back on the client's
event channel when its turn rests, behind the turn's events (so listeners saw the turn end first).

If the channel is lost before a result arrives (the host died, the channel was reaped), the turn
is durable anyway: the caller falls back to waiting for it (``wait_turn``, which survives a host
restart) and reads its result from the store. Queueing is retried safely: submission ids dedupe.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel

from repertory.actors._coalesce import Coalescer
from repertory.actors._feeds import ChannelLost, Feed
from repertory.core.ids import new_id
from repertory.core.messages import ModelMessage
from repertory.core.result import RunResult
from repertory.core.store import TreeStore
from repertory.core.tree import TurnKind
from repertory.runtime.results import turn_result
from repertory.tracing import current_traceparent

__all__ = ["RunBatcher", "RunClient"]

RunItem = tuple[str, ModelMessage, TurnKind, type[BaseModel] | None, str, str | None]
"""(session, message, kind, output type, submission id, the caller's ``traceparent``)."""


class RunClient(Protocol):
    """What a ``RunBatcher`` asks of the client it batches for (``RayHostClient``), which owns the Ray calls."""

    @property
    def store(self) -> TreeStore:
        """The store a lost channel's turn is read back from."""
        ...

    def output_type_for(self, path: str | None, agent: str) -> type[BaseModel] | None:
        """The output type a stored turn's result validates into."""
        ...

    async def retrying(self, call: Callable[[], Any]) -> Any:
        """``call()`` under the client's in-flight bound, again while its host is down."""
        ...

    async def run_turn_direct(
        self, session_id: str, message: ModelMessage, kind: TurnKind, output_type: type[BaseModel] | None
    ) -> RunResult:
        """A turn sent and awaited in one call."""
        ...

    async def wait_turn(self, session_id: str, submission_id: str) -> None:
        """Return once the turn is at rest."""
        ...


class RunBatcher:
    """One host's ``run()``s of this client: queued per loop tick in one Ray call, results on the channel."""

    def __init__(self, client: RunClient, feed: Feed) -> None:
        self._client = client
        self._feed = feed
        self._queue: Coalescer[RunItem, BaseException | None] = Coalescer(self._send)
        self.running = 0  # run()s of this client on this host not yet returned

    async def _send(self, items: list[RunItem]) -> list[BaseException | None]:
        client_id = await self._feed.channel()
        handle = self._feed.handle
        queued: list[BaseException | None] = await self._client.retrying(
            lambda: handle.run_turns.remote(client_id, items)
        )
        return queued

    async def run(
        self, session_id: str, message: ModelMessage, kind: TurnKind, output_type: type[BaseModel] | None
    ) -> RunResult:
        """A run: one direct call when it is alone on its host, else queued with this tick's others.

        Alone, ``run_turn`` is two messages (call, reply) rather than three (call, reply, result on
        the channel): the lower latency when there is nothing to batch with.
        """
        direct = self.running == 0
        self.running += 1
        try:
            if direct:
                return await self._client.run_turn_direct(session_id, message, kind, output_type)
            return await self._via_channel(session_id, message, kind, output_type)
        finally:
            self.running -= 1

    async def _via_channel(
        self, session_id: str, message: ModelMessage, kind: TurnKind, output_type: type[BaseModel] | None
    ) -> RunResult:
        submission_id = new_id()
        result = self._feed.expect(submission_id)
        try:
            refused = await self._queue.submit(
                (session_id, message, kind, output_type, submission_id, current_traceparent())
            )
            if refused is not None:
                raise refused
            outcome = await result
        except ChannelLost:
            await self._client.wait_turn(session_id, submission_id)
            client = self._client
            return await turn_result(client.store, client.output_type_for, session_id, submission_id, output_type)
        finally:
            self._feed.forget(submission_id)
            if not result.done():
                result.cancel()
            elif not result.cancelled():
                result.exception()  # retrieved: a lost channel after an error above is not "never retrieved"
        if isinstance(outcome, BaseException):
            raise outcome
        if not isinstance(outcome, RunResult):
            raise TypeError(f"a host sent {type(outcome).__name__} as a turn's result")
        return outcome
