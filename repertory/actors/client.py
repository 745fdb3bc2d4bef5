"""``RayHostClient``: the Ray backend behind the same ``Runtime`` and handle API as the local one.

The client keeps its own store connection for reads (handles read runs, turns and history
directly) and sends everything that changes a session to the host that owns it. It caches host
handles, bounds the calls it keeps in flight, and retries only what is safe to retry: reads,
waits and cancellations, sends (deduplicated by a client-chosen submission id) and creations
(client-chosen session id). A decision is not retried: its token is single-use, so a lost reply
surfaces as an error rather than a second attempt.

Event streams: one Ray streaming generator per host this client reads from (``_feeds.py``), each
item a batch of events of any of the client's readers. Streams are never retried by Ray (a retried
generator silently drops items); after a host failure the client resubscribes from the last seq it
delivered, and it cancels its streams at close.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal, TypeVar

import ray
from pydantic import BaseModel
from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

from repertory.actors import _bulk
from repertory.actors._coalesce import Coalescer
from repertory.actors._feeds import Feed, Subscription
from repertory.actors._runs import RunBatcher
from repertory.actors.host import shared_host_index
from repertory.actors.supervisor import dedicated_host_name, shared_host_name
from repertory.core.ids import new_id
from repertory.core.messages import ModelMessage
from repertory.core.principal import Principal
from repertory.core.result import RunResult
from repertory.core.state import SuspendReason
from repertory.core.store import TreeStore
from repertory.core.tree import (
    Lineage,
    Placement,
    SessionEvent,
    SessionMetadata,
    SessionRecord,
    TurnKind,
    TurnRecord,
)
from repertory.errors import CommitConflict, SessionNotFound
from repertory.runtime.agent import Agent
from repertory.runtime.compaction import CompactionResult
from repertory.runtime.host import lookup_agent, resolve_output_type

__all__ = ["VERSION", "RayHostClient"]

_T = TypeVar("_T")
_DEAD = (RayActorError, ActorDiedError, ActorUnavailableError)
VERSION = "v2"  # bumped with incompatible host code: a detached actor keeps the code it started with


class RayHostClient:
    """Talks to the shared hosts, dedicated hosts and the supervisor of one store's deployment."""

    def __init__(
        self,
        *,
        store: TreeStore,
        agents: dict[str, Agent],
        namespace: str,
        prefix: str,
        hosts: list[Any],
        supervisor: Any,
        owns_ray: bool,
        max_in_flight: int,
        call_timeout: float,
        keep_hosts: bool,
    ) -> None:
        self.store = store
        self._keep_hosts = keep_hosts
        self.agents = dict(agents)
        self.namespace = namespace
        self.prefix = prefix
        self._hosts = hosts
        self._supervisor = supervisor
        self._owns_ray = owns_ray
        self._slots = asyncio.Semaphore(max_in_flight)
        self._call_timeout = call_timeout
        self._dedicated: dict[str, Any] = {}
        self._placement: dict[str, Placement] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._feeds: dict[str, Feed] = {}
        self._batchers: dict[str, RunBatcher] = {}
        self._creators: dict[int, Coalescer[dict[str, Any], SessionRecord]] = {}
        self._subscribing: dict[str, set[asyncio.Task[None]]] = {}

    # -- routing ------------------------------------------------------------------------------------

    async def _handle_for(self, session_id: str) -> Any:
        placement = self._placement.get(session_id)
        if placement is None:
            record = await self.store.load_session(session_id)
            if record is None:
                raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
            placement = self._placement[session_id] = record.placement
        if placement == "shared":
            return self._hosts[shared_host_index(session_id, len(self._hosts))]
        handle = self._dedicated.get(session_id)
        if handle is None:
            name = await self._supervisor.dedicated_host.remote(session_id)
            handle = self._dedicated[session_id] = ray.get_actor(name, namespace=self.namespace)
        return handle

    async def _subscribed(self, session_id: str) -> None:
        """Wait for listeners added just before a call: they are in place on the host before it runs."""
        pending = self._subscribing.get(session_id)
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    async def _call(self, session_id: str, method: str, *args: Any, retry: bool = True, **kwargs: Any) -> Any:
        """Call a host method; a dead host is waited for (Ray restarts it) and safe calls are retried."""
        await self._subscribed(session_id)
        deadline = time.monotonic() + self._call_timeout
        delay = 0.05
        while True:
            handle = await self._handle_for(session_id)
            try:
                async with self._slots:
                    return await getattr(handle, method).remote(*args, **kwargs)
            except _DEAD:
                if not retry or time.monotonic() > deadline:
                    raise
                self._dedicated.pop(session_id, None)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    # -- operations the handles use -----------------------------------------------------------------

    def agent(self, name: str) -> Agent:
        """The registered agent called ``name``."""
        return lookup_agent(self.agents, name)

    def output_type_for(self, path: str | None, agent: str) -> type[BaseModel] | None:
        """The output type a turn asked for (importable), else its agent's ``output_type``."""
        return resolve_output_type(path) or self.agent(agent).output_type

    async def create_session(
        self,
        *,
        agent: str,
        title: str | None,
        model: str | None,
        cwd: str | None,
        lineage: Lineage,
        root_id: str | None,
        head: str | None,
        session_id: str | None = None,
        placement: Placement = "shared",
        options: dict[str, Any] | None = None,
    ) -> SessionRecord:
        """Create a session where the supervisor places it (retried safely: the id is ours)."""
        self.agent(agent)
        session_id = session_id or new_id()
        kwargs = {
            "agent": agent,
            "title": title,
            "model": model,
            "cwd": cwd,
            "lineage": lineage,
            "root_id": root_id,
            "head": head,
            "session_id": session_id,
        }
        deadline = time.monotonic() + self._call_timeout
        while True:
            try:
                if placement == "shared":
                    # The client knows a shared session's host (a stable hash): no supervisor hop, and
                    # creations of one loop tick travel in one call (idempotent: the ids are ours).
                    record = await self._creations(shared_host_index(session_id, len(self._hosts))).submit(
                        {**kwargs, "placement": placement}
                    )
                else:
                    record = await self._supervisor.create_session.remote(kwargs, placement, options)
                break
            except CommitConflict:
                existing = await self.store.load_session(session_id)  # a retry after our own first attempt
                if existing is None:
                    raise
                record = existing
                break
            except _DEAD:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)
        self._placement[session_id] = record.placement
        return record

    def _creations(self, index: int) -> Coalescer[dict[str, Any], SessionRecord]:
        coalescer = self._creators.get(index)
        if coalescer is None:
            host = self._hosts[index]

            async def send(batch: list[dict[str, Any]]) -> list[SessionRecord]:
                async with self._slots:
                    made: list[SessionRecord] = await host.create_sessions.remote(batch)
                return made

            coalescer = self._creators[index] = Coalescer(send)
        return coalescer

    async def create_sessions(self, batch: list[dict[str, Any]]) -> list[SessionRecord]:
        """Create shared sessions in bulk (``_bulk.create_sessions``)."""
        return await _bulk.create_sessions(self, batch)

    async def send_many(self, batch: list[tuple[str, ModelMessage, TurnKind, str]]) -> list[TurnRecord]:
        """Queue turns on shared sessions in bulk (``_bulk.send_many``)."""
        return await _bulk.send_many(self, batch)

    async def send(
        self,
        session_id: str,
        message: ModelMessage,
        kind: TurnKind,
        if_busy: Literal["enqueue", "reject", "interrupt"],
        output_type: type[BaseModel] | None,
        submission_id: str | None = None,
    ) -> TurnRecord:
        """Queue a turn on the session's host (deduplicated on retry by the submission id)."""
        turn: TurnRecord = await self._call(
            session_id, "send", session_id, message, kind, if_busy, output_type, submission_id or new_id()
        )
        return turn

    async def run_turn(
        self, session_id: str, message: ModelMessage, kind: TurnKind, output_type: type[BaseModel] | None
    ) -> RunResult:
        """Queue the turn in this tick's batch for its host; the result comes back on the event channel."""
        await self._subscribed(session_id)
        feed = await self._feed_for(session_id)
        batcher = self._batchers.get(feed.key)
        if batcher is None:
            batcher = self._batchers[feed.key] = RunBatcher(self, feed.handle, feed)
        return await batcher.run(session_id, message, kind, output_type)

    async def run_turn_direct(
        self, session_id: str, message: ModelMessage, kind: TurnKind, output_type: type[BaseModel] | None
    ) -> RunResult:
        """Send and wait in one Ray call (retried safely: the submission id dedupes the send)."""
        result: RunResult = await self._call(session_id, "run_turn", session_id, message, kind, output_type, new_id())
        await self._flush(session_id)
        return result

    async def wait_turn(self, session_id: str, submission_id: str) -> None:
        """Return once the turn is at rest; survives a host restart."""
        await self._call(session_id, "wait_turn", session_id, submission_id)
        await self._flush(session_id)

    async def cancel_turn(self, session_id: str, submission_id: str) -> None:
        """Cancel one turn."""
        await self._call(session_id, "cancel_turn", session_id, submission_id)

    async def cancel(self, session_id: str) -> None:
        """Cancel every turn of a session and its suspended run."""
        await self._call(session_id, "cancel", session_id)

    async def pending_approvals(self, session_id: str) -> list[SuspendReason]:
        """The session's live approval request, if any."""
        result: list[SuspendReason] = await self._call(session_id, "pending_approvals", session_id)
        return result

    async def compact(self, session_id: str) -> CompactionResult | None:
        """Compact the session's context now; not retried (a summary request costs tokens)."""
        result: CompactionResult | None = await self._call(session_id, "compact", session_id, retry=False)
        await self._flush(session_id)
        return result

    async def decide(
        self,
        session_id: str,
        kind: Literal["approve", "reject", "resume"],
        token: str,
        principal: Principal,
        params: dict[str, Any],
    ) -> RunResult:
        """Approve, reject or resume; never retried (the token is single-use)."""
        result: RunResult = await self._call(
            session_id, "decide", session_id, kind, token, principal, params, retry=False
        )
        await self._flush(session_id)
        return result

    async def metadata(self, session_id: str) -> SessionMetadata:
        """Title, model, live status, cwd and times."""
        result: SessionMetadata = await self._call(session_id, "metadata", session_id)
        return result

    async def _feed_for(self, session_id: str) -> Feed:
        handle = await self._handle_for(session_id)
        key = handle._actor_id.hex()
        feed = self._feeds.get(key)
        if feed is None:
            feed = self._feeds[key] = Feed(handle, key)
        return feed

    async def _flush(self, session_id: str) -> None:
        """Return once this session's listeners here were called with what its host published so far."""
        for feed in list(self._feeds.values()):
            await feed.flush(session_id)

    async def events(self, session_id: str, after_seq: int = 0) -> AsyncIterator[SessionEvent]:
        """Stored then live events over this client's feed; resubscribed from the last seq after a failure."""
        feed = await self._feed_for(session_id)
        sub = Subscription(session_id, after_seq)
        await feed.subscribe(sub)
        try:
            while True:
                yield await sub.queue.get()
        finally:
            await feed.unsubscribe(sub)

    def listen(self, session_id: str, listener: Callable[[SessionEvent], None]) -> Callable[[], None]:
        """Call ``listener`` with the session's events from now on (the next call on it waits for this)."""
        sub = Subscription(session_id, -1, listener=listener)
        feed: list[Feed] = []

        async def attach() -> None:
            feed.append(await self._feed_for(session_id))
            await feed[0].subscribe(sub)

        task = asyncio.get_running_loop().create_task(attach())
        pending = self._subscribing.setdefault(session_id, set())
        pending.add(task)
        self._tasks.add(task)

        def attached(done: asyncio.Task[None]) -> None:
            pending.discard(done)
            self._tasks.discard(done)
            if not pending and self._subscribing.get(session_id) is pending:
                del self._subscribing[session_id]
            if not done.cancelled() and done.exception() is not None:
                import logging

                logging.getLogger("repertory.events").error("on_progress could not subscribe: %s", done.exception())

        task.add_done_callback(attached)

        def stop() -> None:
            sub.closed = True  # nothing more reaches the caller, even before the host drops it
            if not task.done():
                task.cancel()
            elif feed:
                removal = asyncio.get_running_loop().create_task(feed[0].unsubscribe(sub))
                self._tasks.add(removal)
                removal.add_done_callback(self._tasks.discard)

        return stop

    async def close_feeds(self) -> None:
        """Cancel this client's event streams (readers and listeners stop; the hosts drop them)."""
        for feed in list(self._feeds.values()):
            await feed.close()
        self._feeds.clear()
        self._batchers.clear()

    # -- administration -----------------------------------------------------------------------------

    def _all_hosts(self) -> list[Any]:
        return [*self._hosts, *self._dedicated.values()]

    def passivate_idle(self, older_than: float) -> int:
        """Passivate idle sessions on every host now (blocking: an administrative knob)."""
        return sum(ray.get([h.passivate_idle.remote(older_than) for h in self._all_hosts()]))

    @property
    def resident(self) -> int:
        """Sessions in memory across the hosts (blocking: an administrative knob)."""
        return sum(ray.get([h.resident.remote() for h in self._all_hosts()]))

    async def ping(self) -> list[dict[str, Any]]:
        """Every host's facts (pid, resident sessions)."""
        return list(await asyncio.gather(*(h.ping.remote() for h in self._all_hosts())))

    async def close(self) -> None:
        """Stop local streams; unless the hosts are kept, stop them, the supervisor, and Ray if ours.

        Hosts are stopped with ``ray.kill``, as a crash would: runs stay as last committed and the
        next start re-drives them. Ray itself is shut down only if this client started it.
        """
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.close_feeds()
        if self._keep_hosts:
            return
        names = [shared_host_name(self.prefix, i) for i in range(len(self._hosts))]
        for record_id in list(self._placement):
            if self._placement[record_id] == "dedicated":
                names.append(dedicated_host_name(self.prefix, record_id))
        for name in names:
            with contextlib.suppress(Exception):
                ray.kill(ray.get_actor(name, namespace=self.namespace))
        with contextlib.suppress(Exception):
            ray.kill(self._supervisor)
        if self._owns_ray:
            ray.shutdown()
