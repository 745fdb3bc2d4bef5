"""``RayHostClient``: the Ray backend's ``SessionBackend``, behind the same ``Runtime`` and handles as the local one.

It implements ``repertory.runtime.backend.SessionBackend`` (the one statement of the interface;
``SessionHost`` is its remote half and mirrors those methods). The client keeps its own store
connection for reads (handles read runs, turns and history directly) and sends everything that
changes a session to the host that owns it. It caches host handles, bounds the calls it keeps in
flight, and retries only what is safe to retry: reads, waits and cancellations, sends
(deduplicated by a client-chosen submission id) and creations (client-chosen session id: a
creation retried after its host died takes the session it finds only if that is the one it asked
for, else the id was taken and ``SessionExists`` says so). A decision is not retried: its token is
single-use, so a lost reply surfaces as an error rather than a second attempt. Bulk calls
(``create_sessions``, ``send_many``) go one Ray call per host per 1,000 items: one call per
session costs a round trip each (~1 ms), while a host creates ~19,000 sessions a second when they
arrive 100 or more per call.

Event streams: one Ray streaming generator per host this client reads from (``_feeds.py``), each
item a batch of events of any of the client's readers. Streams are never retried by Ray (a retried
generator silently drops items); after a host failure the client resubscribes from the last seq it
delivered, and it cancels its streams at close.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

import ray
from pydantic import BaseModel, JsonValue
from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

from repertory.actors._coalesce import Coalescer
from repertory.actors._feeds import Feed, Subscription
from repertory.actors._runs import RunBatcher
from repertory.actors._wire import decode_result, encode_request
from repertory.actors.names import dedicated_host_name, shared_host_index, shared_host_name
from repertory.core.decisions import Decision
from repertory.core.ids import new_id
from repertory.core.messages import ModelMessage
from repertory.core.principal import Principal
from repertory.core.result import RunResult
from repertory.core.state import SuspendReason
from repertory.core.store import DeletedRows, TreeStore
from repertory.core.toolspec import ToolSpec
from repertory.core.tree import (
    IfBusy,
    NewSession,
    Placement,
    SessionEvent,
    SessionMetadata,
    SessionRecord,
    TurnKind,
    TurnRecord,
)
from repertory.errors import SessionExists, SessionNotFound
from repertory.runtime.agent import Agent
from repertory.runtime.compaction import CompactionResult
from repertory.runtime.host import lookup_agent, resolve_output_type
from repertory.tracing import current_traceparent

__all__ = ["RayHostClient"]

_T = TypeVar("_T")
_DEAD = (RayActorError, ActorDiedError, ActorUnavailableError)


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
        self._creators: dict[int, Coalescer[NewSession, SessionRecord | SessionExists]] = {}
        self._subscribing: dict[str, set[asyncio.Task[None]]] = {}

    # -- routing ------------------------------------------------------------------------------------

    @property
    def hosts(self) -> list[Any]:
        """The Ray handles of the shared hosts, in index order (a copy; for operators and tests)."""
        return list(self._hosts)

    @property
    def supervisor(self) -> Any:
        """The Ray handle of the supervisor."""
        return self._supervisor

    def kill_host(self, index: int) -> None:
        """Kill shared host ``index`` as a crash would (Ray restarts it, and it re-drives its open runs).

        For fault drills (the demo's host kill, chaos runs): nothing is told to the host first.
        """
        ray.kill(self._hosts[index], no_restart=False)

    async def _route(self, session_id: str) -> tuple[str, Any]:
        """The Ray name and handle of the host that runs ``session_id``."""
        placement = self._placement.get(session_id)
        if placement is None:
            record = await self.store.load_session(session_id)
            if record is None:
                raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
            placement = self._placement[session_id] = record.placement
        if placement == "shared":
            index = shared_host_index(session_id, len(self._hosts))
            return shared_host_name(self.prefix, index), self._hosts[index]
        handle = self._dedicated.get(session_id)
        if handle is None:
            name = await self._supervisor.dedicated_host.remote(session_id)
            handle = self._dedicated[session_id] = ray.get_actor(name, namespace=self.namespace)
        return dedicated_host_name(self.prefix, session_id), handle

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
            _, handle = await self._route(session_id)
            try:
                async with self._slots:
                    return await getattr(handle, method).remote(*args, **kwargs)
            except _DEAD:
                if not retry or time.monotonic() > deadline:
                    raise
                self._dedicated.pop(session_id, None)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    # -- the SessionBackend operations (repertory.runtime.backend) ----------------------------------

    def agent(self, name: str) -> Agent:
        """The registered agent called ``name``."""
        return lookup_agent(self.agents, name)

    def output_type_for(self, path: str | None, agent: str) -> type[BaseModel] | None:
        """The output type a turn asked for (importable), else its agent's ``output_type``."""
        return resolve_output_type(path) or self.agent(agent).output_type

    async def retrying(self, call: Callable[[], Any]) -> Any:
        """Await ``call()`` under the in-flight bound, again while its host is down (idempotent calls only)."""
        result, _ = await self._retrying(call)
        return result

    async def _retrying(self, call: Callable[[], Any], *, bounded: bool = True) -> tuple[Any, bool]:
        """``call()``'s result and whether it took more than one attempt (``bounded``: under the in-flight bound)."""
        deadline = time.monotonic() + self._call_timeout
        retried = False
        while True:
            try:
                if not bounded:
                    return await call(), retried
                async with self._slots:
                    return await call(), retried
            except _DEAD:
                if time.monotonic() > deadline:
                    raise
                retried = True
                await asyncio.sleep(0.1)

    async def _created(self, spec: NewSession, outcome: SessionRecord | SessionExists, retried: bool) -> SessionRecord:
        """A creation's record; a taken id is ours only after a retry, and only if the row is what we asked for."""
        if isinstance(outcome, SessionRecord):
            return outcome
        if retried:
            existing = await self.store.load_session(spec.session_id)  # the first attempt's, before its host died?
            if existing is not None and spec.made(existing):
                return existing
        raise outcome

    async def create_session(self, spec: NewSession, *, options: dict[str, Any] | None = None) -> SessionRecord:
        """Create a session where it belongs; ``SessionExists`` if its id is taken.

        A shared session's host is a stable hash of its id, so the client sends the creation there
        itself, with the other creations of the same loop tick in one call. A dedicated one goes
        through the supervisor (``options``: Ray actor options for its host), whose calls Ray
        retries by itself: there, an existing row identical to ``spec`` is taken for a retry's.
        """
        self.agent(spec.agent)
        spec.record(0)  # validates: a bad id or metadata fails here, in the caller, not in a host
        outcome: SessionRecord | SessionExists
        if spec.placement == "shared":
            creations = self._creations(shared_host_index(spec.session_id, len(self._hosts)))
            # Unbounded here: the batch's one Ray call takes the in-flight slot (in ``_creations``).
            outcome, retried = await self._retrying(lambda: creations.submit(spec), bounded=False)
        else:
            supervisor = self._supervisor
            try:
                outcome, _ = await self._retrying(
                    lambda: supervisor.create_session.remote(spec, options), bounded=False
                )
            except SessionExists:  # Ray's wrapper of the host's error: a plain one for the caller
                outcome = SessionExists(
                    f"a session or thread with id {spec.session_id!r} already exists", session_id=spec.session_id
                )
            retried = True
        record = await self._created(spec, outcome, retried)
        self._placement[record.session_id] = record.placement
        return record

    def _creations(self, index: int) -> Coalescer[NewSession, SessionRecord | SessionExists]:
        coalescer = self._creators.get(index)
        if coalescer is None:
            host = self._hosts[index]

            async def send(batch: list[NewSession]) -> list[SessionRecord | SessionExists]:
                async with self._slots:
                    made: list[SessionRecord | SessionExists] = await host.create_sessions.remote(batch)
                return made

            coalescer = self._creators[index] = Coalescer(send)
        return coalescer

    async def create_sessions(self, specs: list[NewSession]) -> list[SessionRecord]:
        """Create shared sessions in bulk: one call per host per 1,000 (ids are ours, so retries are safe)."""
        for spec in specs:
            self.agent(spec.agent)
            spec.record(0)  # validates here, as create_session does
            if spec.placement != "shared":
                raise ValueError(f"create_sessions is for shared sessions; {spec.session_id!r} is {spec.placement}")
        records: dict[str, SessionRecord] = {}

        async def chunk(index: int, part: list[NewSession]) -> None:
            outcomes, retried = await self._retrying(lambda: self._hosts[index].create_sessions.remote(part))
            for spec, outcome in zip(part, outcomes, strict=True):
                records[spec.session_id] = await self._created(spec, outcome, retried)

        await asyncio.gather(*(chunk(i, part) for i, part in self._by_host(specs, lambda s: s.session_id)))
        for session_id in records:
            self._placement[session_id] = "shared"
        return [records[spec.session_id] for spec in specs]

    async def send_many(self, batch: list[tuple[str, ModelMessage, TurnKind, str]]) -> list[TurnRecord]:
        """Queue turns on shared sessions in bulk (deduplicated by submission id when retried)."""
        turns: dict[str, TurnRecord] = {}
        caller = current_traceparent()

        async def chunk(index: int, part: list[tuple[str, ModelMessage, TurnKind, str]]) -> None:
            made: list[TurnRecord] = await self.retrying(lambda: self._hosts[index].send_many.remote(part, caller))
            turns.update((t.submission_id, t) for t in made)

        for session_id in {item[0] for item in batch}:
            _, handle = await self._route(session_id)
            if handle not in self._hosts:
                raise ValueError(f"send_many is for shared sessions; {session_id!r} has a dedicated host")
        await asyncio.gather(*(chunk(i, part) for i, part in self._by_host(batch, lambda item: item[0])))
        return [turns[item[3]] for item in batch]

    def _by_host(
        self, items: Sequence[_T], session_of: Callable[[_T], str], size: int = 1_000
    ) -> list[tuple[int, list[_T]]]:
        """Items grouped by the shared host of their session, in chunks of ``size``."""
        groups: dict[int, list[_T]] = {}
        for item in items:
            groups.setdefault(shared_host_index(session_of(item), len(self._hosts)), []).append(item)
        return [(i, group[j : j + size]) for i, group in groups.items() for j in range(0, len(group), size)]

    async def send(
        self,
        session_id: str,
        message: ModelMessage,
        kind: TurnKind,
        if_busy: IfBusy,
        output_type: type[BaseModel] | None,
        submission_id: str | None = None,
        client_tools: Sequence[ToolSpec] = (),
    ) -> TurnRecord:
        """Queue a turn on the session's host (deduplicated on retry by the submission id)."""
        turn: TurnRecord = await self._call(
            session_id,
            "send",
            session_id,
            message,
            kind,
            if_busy,
            output_type,
            submission_id or new_id(),
            current_traceparent(),  # the turn's span continues the caller's, as on the local backend
            list(client_tools),
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
            batcher = self._batchers[feed.key] = RunBatcher(self, feed)
        return await batcher.run(session_id, message, kind, output_type)

    async def run_turn_direct(
        self, session_id: str, message: ModelMessage, kind: TurnKind, output_type: type[BaseModel] | None
    ) -> RunResult:
        """Send and wait in one Ray call (retried safely: the submission id dedupes the send).

        Without an output type the call's request and result travel as text (``_wire``).
        """
        result: RunResult
        caller = current_traceparent()
        if output_type is None:
            request = encode_request(session_id, message, kind, new_id(), caller)
            result = decode_result(await self._call(session_id, "run_turn_text", request))
        else:
            result = await self._call(session_id, "run_turn", session_id, message, kind, output_type, new_id(), caller)
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

    async def recover(self, session_id: str) -> list[str]:
        """Drive again the session's open turns on its host (idempotent, so retried like a read)."""
        result: list[str] = await self._call(session_id, "recover", session_id)
        return result

    async def compact(self, session_id: str) -> CompactionResult | None:
        """Compact the session's context now; not retried (a summary request costs tokens)."""
        result: CompactionResult | None = await self._call(session_id, "compact", session_id, retry=False)
        await self._flush(session_id)
        return result

    async def decide(self, session_id: str, decision: Decision, principal: Principal) -> RunResult:
        """Approve, reject or resume; never retried (the token is single-use)."""
        result: RunResult = await self._call(
            session_id, "decide", session_id, decision, principal, current_traceparent(), retry=False
        )
        await self._flush(session_id)
        return result

    async def metadata(self, session_id: str) -> SessionMetadata:
        """Title, model, live status, cwd and times."""
        result: SessionMetadata = await self._call(session_id, "metadata", session_id)
        return result

    async def amend_session(
        self, session_id: str, *, agent: str | None = None, metadata: dict[str, JsonValue] | None = None
    ) -> SessionRecord:
        """Rebind the agent and/or replace the metadata on the session's host (safe to retry: it sets, not adds)."""
        record: SessionRecord = await self._call(session_id, "amend_session", session_id, agent, metadata)
        return record

    async def delete_sessions(self, session_ids: list[str]) -> DeletedRows:
        """Retire each session on its host, delete every row in one store transaction, then release the marks.

        Retiring is safe to retry; if this client dies before releasing, a host keeps refusing
        those ids until it restarts, which is what their deleted rows would say anyway.
        """
        ids = list(dict.fromkeys(session_ids))
        by_host: dict[str, tuple[Any, list[str]]] = {}
        for session_id in ids:
            try:
                name, handle = await self._route(session_id)
            except SessionNotFound:
                continue  # nothing to stop; the store skips it too
            by_host.setdefault(name, (handle, []))[1].append(session_id)
        for handle, hosted in by_host.values():
            await self.retrying(functools.partial(handle.retire.remote, hosted))
        try:
            return await self.store.delete_sessions(ids)
        finally:
            for handle, hosted in by_host.values():
                with contextlib.suppress(*_DEAD):
                    await handle.release.remote(hosted)
            for session_id in ids:
                self._placement.pop(session_id, None)
                self._dedicated.pop(session_id, None)

    async def _feed_for(self, session_id: str) -> Feed:
        # Keyed by the host's Ray name: a restarted detached actor keeps its name (and its actor id).
        key, handle = await self._route(session_id)
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

    # -- time ---------------------------------------------------------------------------------------

    def nudge_timers(self, session_id: str | None) -> None:
        """Tell every host to look at its schedules now (fire and forget; each still polls on its own)."""
        for host in self._all_hosts():
            host.nudge_timers.remote(session_id)

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
