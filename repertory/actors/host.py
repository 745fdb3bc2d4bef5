"""``SessionHost``: an async Ray actor hosting many ``SessionActor``s (the Ray backend's unit).

A Ray actor is a whole process (~50 MB, ~0.3 s to start), so sessions do not get one each: a host
runs a ``LocalHost`` (activation from the store, passivation, the mailbox of every session) and
Ray gives it a process, restarts and placement. Hosts are detached, named with the repertory
version (a detached actor keeps the code it started with), restarted forever (``max_restarts=-1``).

A restarted host reruns ``__init__`` with empty memory: it reopens the store and re-drives the
turns its sessions left ``queued`` or ``running`` (a turn is durable before ``send`` returns, and a
``running`` run is re-driven by the same step loop that recovers a crash). Calls that Ray may retry
are idempotent or deduplicated (``send`` carries a client-chosen submission id). Events go out on
one multiplexed stream per client connection (``_channels.py``), which shares the actor's one event
loop with control calls (see ``host_actor_class``).

The control methods are the remote half of ``RayHostClient``: each mirrors the
``repertory.runtime.backend.SessionBackend`` method of its name (where a retry needs it, with the
client-chosen id as one more argument) and hands it to the ``LocalHost`` inside.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import ray
from pydantic import BaseModel, JsonValue

from repertory.actors._channels import KEEPALIVE_SECONDS, Channels, Item
from repertory.actors._runs import RunItem
from repertory.actors._tree import HostTree
from repertory.actors._wire import decode_request, encode_result
from repertory.actors.names import PREFIX, deployment_namespace, shared_host_index, shared_host_name, supervisor_name
from repertory.core.decisions import Decision
from repertory.core.memory import MemoryFactory
from repertory.core.messages import ModelMessage
from repertory.core.principal import Principal
from repertory.core.result import RunResult
from repertory.core.state import SuspendReason
from repertory.core.store import TreeStore
from repertory.core.toolspec import ToolSpec
from repertory.core.tree import (
    IfBusy,
    NewSession,
    SessionMetadata,
    SessionRecord,
    TurnKind,
    TurnRecord,
)
from repertory.errors import CommitConflict, SessionExists, StoreError
from repertory.runtime.compaction import CompactionResult
from repertory.runtime.gc_tuning import freeze_startup, tune_gc
from repertory.runtime.host import LocalHost
from repertory.tracing import configure_from_env, under_traceparent
from repertory.tree.agent_specs import AgentSpec, resolve_agents
from repertory.tree.delegation import TreeServices

if TYPE_CHECKING:
    from repertory.actors.client import RayHostClient

__all__ = ["SessionHost", "host_actor_class"]

_log = logging.getLogger("repertory.actors")
_BOOT_RETRY_FIRST_S = 0.5
"""The pause before a boot that failed on the store tries again; it doubles each time."""
_BOOT_RETRY_MAX_S = 10.0
"""The longest pause between two boot attempts."""


def host_actor_class() -> Any:
    """``SessionHost`` as a Ray actor class, with no extra concurrency groups on purpose.

    In an async actor each concurrency group runs its own event loop in its own thread, and a
    session's event bus (asyncio queues) must live on the loop that runs the session: a stream in
    another group never woke up (measured). Streams and control calls share the default group,
    whose ``max_concurrency`` (1,000) keeps open streams from starving control calls.
    """
    remote: Any = ray.remote
    return remote(SessionHost)


class SessionHost:
    """The actor class (decorated with ``ray.remote`` by the client, which sets its options)."""

    def __init__(
        self,
        store_url: str,
        agents: dict[str, AgentSpec],
        *,
        index: int,
        hosts: int,
        idle_timeout: float,
        dedicated_session: str | None = None,
        cwd: str | None = None,
        memory: MemoryFactory | None = None,
        shared_hosts: int | None = None,
    ) -> None:
        tune_gc()  # a host process holds many sessions (see repertory.runtime.gc_tuning)
        configure_from_env()  # a host is repertory's own process: it exports spans if OTEL_EXPORTER_OTLP_* says where
        self.store_url = store_url
        self.index = index
        self.hosts = hosts
        # How many shared hosts the deployment has: a dedicated host is its own index 0 of 1, but
        # its sessions' delegations reach children on the shared hosts.
        self.shared_hosts = shared_hosts if shared_hosts is not None else hosts
        self.dedicated_session = dedicated_session
        self.idle_timeout = idle_timeout
        self._agents = resolve_agents(agents)  # paths are imported here, by the host itself
        self._memory = memory
        if cwd is not None:
            os.makedirs(cwd, exist_ok=True)
            os.chdir(cwd)  # a dedicated session's tools run in its own working directory
        self._host: LocalHost | None = None
        self._store: TreeStore | None = None
        self._channels = Channels()
        self._deliveries: set[asyncio.Task[None]] = set()
        self._tree: RayHostClient | None = None  # made on the first delegation (see _tree_backend)
        self._boot_pause = _BOOT_RETRY_FIRST_S  # before the next boot attempt, if this one fails on the store
        self._booting = asyncio.get_event_loop().create_task(self._boot())

    async def _boot(self) -> None:
        """Open the store and re-drive this host's open turns; a failure on the store is tried again later.

        Nobody awaits a host's boot but its calls, so a boot that failed once on the store (a
        PostgreSQL restarting, a SQLite write lock held past the busy timeout, as a restart after a
        node loss may meet) used to fail every call for the rest of the process's life, and the open
        turns it was to re-drive stayed open. Now a failed attempt schedules the next one (a pause
        doubling from 0.5 s to 10 s); calls meanwhile raise the last attempt's error, so a caller
        still hears why at once. ``LocalHost.start`` is safe to run again: a turn it already queued
        is not queued twice.
        """
        from repertory.storage.url import open_store

        try:
            if self._store is None:
                store = await open_store(self.store_url)
                assert isinstance(store, TreeStore)
                self._store = store
            if self._host is None:
                self._host = self._local_host(self._store)
            await self._host.start(owns=self.owns)
            freeze_startup()  # what booting made lives as long as the host (see repertory.runtime.gc_tuning)
        except StoreError as exc:
            if not isinstance(exc, CommitConflict):
                pause, self._boot_pause = self._boot_pause, min(self._boot_pause * 2, _BOOT_RETRY_MAX_S)
                _log.warning("host %s could not start on its store (%s); again in %.1f s", self.index, exc, pause)
                asyncio.get_running_loop().call_later(pause, self._boot_again)
            raise
        self._reaper = asyncio.get_running_loop().create_task(self._reap_silent_channels())

    def _boot_again(self) -> None:
        failed = self._booting
        if not failed.cancelled():
            failed.exception()  # retrieved: the calls made meanwhile were told
        self._booting = asyncio.get_running_loop().create_task(self._boot())

    def _local_host(self, store: TreeStore) -> LocalHost:
        """The in-process host of this actor's sessions, its delegations served through a ``HostTree``."""
        host = LocalHost(store, self._agents, idle_timeout=self.idle_timeout, memory=self._memory, dedicated=True)
        tree = HostTree(host, self.owns, self._tree_backend)
        host.services = TreeServices(store, lambda: tree)
        return host

    async def _reap_silent_channels(self) -> None:
        while True:
            await asyncio.sleep(KEEPALIVE_SECONDS)
            self._channels.reap()

    def _tree_backend(self) -> RayHostClient:
        """The client this host's tools reach the other hosts' children through (see ``HostTree``).

        Made on first use, when the other hosts exist (they are created alongside this one), with
        the names every client derives from the store URL; it never stops the hosts it talks to.
        """
        if self._tree is None:
            from repertory.actors.client import RayHostClient

            assert self._store is not None and self._host is not None
            namespace, prefix = deployment_namespace(self.store_url), PREFIX
            self._tree = RayHostClient(
                store=self._store,
                agents=self._host.agents,
                namespace=namespace,
                prefix=prefix,
                hosts=[
                    ray.get_actor(shared_host_name(prefix, i), namespace=namespace) for i in range(self.shared_hosts)
                ],
                supervisor=ray.get_actor(supervisor_name(prefix), namespace=namespace),
                owns_ray=False,
                max_in_flight=256,
                call_timeout=60.0,
                keep_hosts=True,
            )
        return self._tree

    def owns(self, session_id: str) -> bool:
        """Whether this host is where ``session_id`` runs (its re-drives are ours to do)."""
        if self.dedicated_session is not None:
            return session_id == self.dedicated_session
        return shared_host_index(session_id, self.hosts) == self.index

    async def _ready(self) -> LocalHost:
        await asyncio.shield(self._booting)
        assert self._host is not None
        return self._host

    async def local_host(self) -> LocalHost:
        """The in-process host once the store is open, for a subclass's own methods (a benchmark's probes).

        A ``LocalHost`` does not leave its process: this is of no use to a remote caller.
        """
        return await self._ready()

    # -- control ------------------------------------------------------------------------------------

    async def ping(self) -> dict[str, Any]:
        """Liveness and facts: pid, resident sessions, activations since start."""
        host = await self._ready()
        return {
            "pid": os.getpid(),
            "node_id": ray.get_runtime_context().get_node_id(),
            "resident": host.resident,
            "activations": host.activations,
            "streams": self._channels.open_streams,
            "subscriptions": self._channels.subscriptions,
            "index": self.index,
            "dedicated": self.dedicated_session,
            "cwd": os.getcwd(),
        }

    async def register_agents(self, agents: dict[str, AgentSpec]) -> list[str]:
        """Add or replace agents (a new client registering the names it knows)."""
        host = await self._ready()
        host.agents.update(resolve_agents(agents))
        if self._tree is not None:
            self._tree.agents.update(host.agents)  # its creations check agent names against these
        return sorted(host.agents)

    async def create_session(self, spec: NewSession) -> SessionRecord:
        """Persist a new session placed on this host (``SessionExists`` if the id is taken)."""
        host = await self._ready()
        return await host.create_session(spec)

    async def create_sessions(self, specs: list[NewSession]) -> list[SessionRecord | SessionExists]:
        """Bulk creation: one call for many sessions; a taken id is that item's ``SessionExists``, not the call's.

        The creations run concurrently, so the store's group commit writes them in a few
        transactions rather than one each. The client tells a retry's own first attempt from a
        taken id (it knows whether it retried): this host cannot, as a retry reaches a fresh process.
        """
        host = await self._ready()

        async def create(spec: NewSession) -> SessionRecord | SessionExists:
            try:
                return await host.create_session(spec)
            except SessionExists as exc:
                return exc

        return list(await asyncio.gather(*(create(spec) for spec in specs)))

    async def send(
        self,
        session_id: str,
        message: ModelMessage,
        kind: TurnKind,
        if_busy: IfBusy,
        output_type: type[BaseModel] | None,
        submission_id: str,
        traceparent: str | None = None,
        client_tools: Sequence[ToolSpec] = (),
    ) -> TurnRecord:
        """Queue a turn (idempotent by ``submission_id``), under the caller's span (``traceparent``)."""
        host = await self._ready()
        with under_traceparent(traceparent):
            return await host.send(session_id, message, kind, if_busy, output_type, submission_id, client_tools)

    async def send_many(
        self, batch: list[tuple[str, ModelMessage, TurnKind, str]], traceparent: str | None = None
    ) -> list[TurnRecord]:
        """Bulk sends ``(session_id, message, kind, submission_id)``, each enqueued under the caller's span."""
        host = await self._ready()
        with under_traceparent(traceparent):
            return await host.send_many(batch)

    async def run_turn(
        self,
        session_id: str,
        message: ModelMessage,
        kind: TurnKind,
        output_type: type[BaseModel] | None,
        submission_id: str,
        traceparent: str | None = None,
    ) -> RunResult:
        """Queue a turn, wait for it to rest and return its result: ``handle.run()`` in one call."""
        host = await self._ready()
        with under_traceparent(traceparent):
            return await host.run_turn(session_id, message, kind, output_type, submission_id)

    async def run_turn_text(self, request: str) -> str | RunResult:
        """``run_turn`` without an output type, its arguments and result as text (``repertory.actors._wire``)."""
        session_id, message, kind, submission_id, traceparent = decode_request(request)
        host = await self._ready()
        with under_traceparent(traceparent):
            return encode_result(await host.run_turn(session_id, message, kind, None, submission_id))

    async def run_turns(self, client_id: str, batch: list[RunItem]) -> list[BaseException | None]:
        """Queue many turns (``RunItem``: session, message, kind, output type, submission id, traceparent).

        Returns once every turn is durable (or, per item, the error that kept it from being queued).
        Each result is pushed to the client's channel when its turn rests: one Ray call carries a
        whole batch of ``handle.run()``s instead of one call each. Retried safely (submission ids).
        Each turn is queued under its caller's span, as ``send`` queues one.
        """
        host = await self._ready()
        queued: list[BaseException | None] = []
        for session_id, message, kind, output_type, submission_id, traceparent in batch:
            try:
                with under_traceparent(traceparent):
                    await host.send(session_id, message, kind, "enqueue", output_type, submission_id)
            except Exception as exc:
                queued.append(exc)
                continue
            queued.append(None)
            task = asyncio.get_running_loop().create_task(
                self._deliver_result(client_id, session_id, submission_id, output_type)
            )
            self._deliveries.add(task)
            task.add_done_callback(self._deliveries.discard)
        return queued

    async def _deliver_result(
        self, client_id: str, session_id: str, submission_id: str, output_type: type[BaseModel] | None
    ) -> None:
        host = await self._ready()
        outcome: RunResult | BaseException
        try:
            outcome = await host.turn_outcome(session_id, submission_id, output_type)
        except Exception as exc:
            outcome = exc
        self._channels.result(client_id, submission_id, outcome)

    async def wait_turn(self, session_id: str, submission_id: str) -> None:
        """Return once the turn is at rest (safe to retry)."""
        host = await self._ready()
        await host.wait_turn(session_id, submission_id)

    async def cancel_turn(self, session_id: str, submission_id: str) -> None:
        """Cancel one turn (safe to retry)."""
        host = await self._ready()
        await host.cancel_turn(session_id, submission_id)

    async def cancel(self, session_id: str) -> None:
        """Cancel everything of a session (safe to retry)."""
        host = await self._ready()
        await host.cancel(session_id)

    async def pending_approvals(self, session_id: str) -> list[SuspendReason]:
        """The session's live approval request, if any."""
        host = await self._ready()
        return await host.pending_approvals(session_id)

    async def recover(self, session_id: str) -> list[str]:
        """Queue the session's open turns on its actor (safe to retry: a known turn is not queued twice)."""
        host = await self._ready()
        return await host.recover(session_id)

    async def compact(self, session_id: str) -> CompactionResult | None:
        """Compact the session's context now, in its mailbox order (never retried by the client)."""
        host = await self._ready()
        return await host.compact(session_id)

    async def decide(
        self, session_id: str, decision: Decision, principal: Principal, traceparent: str | None = None
    ) -> RunResult:
        """Approve, reject or resume (single-use tokens make a retry fail safely); its drive links the caller's span."""
        host = await self._ready()
        with under_traceparent(traceparent):
            return await host.decide(session_id, decision, principal)

    async def metadata(self, session_id: str) -> SessionMetadata:
        """Title, model, live status, cwd and times."""
        host = await self._ready()
        return await host.metadata(session_id)

    async def amend_session(
        self, session_id: str, agent: str | None, metadata: dict[str, JsonValue] | None
    ) -> SessionRecord:
        """Rebind the agent and/or replace the metadata (safe to retry)."""
        host = await self._ready()
        return await host.amend_session(session_id, agent=agent, metadata=metadata)

    async def retire(self, session_ids: list[str]) -> None:
        """Stop these sessions before the client deletes them (safe to retry; see ``LocalHost.retire``)."""
        host = await self._ready()
        await host.retire(session_ids)

    async def release(self, session_ids: list[str]) -> None:
        """Forget the marks ``retire`` left, once their rows are gone."""
        host = await self._ready()
        host.release(session_ids)

    async def passivate_idle(self, older_than: float) -> int:
        """Drop idle sessions from memory now; returns how many left."""
        host = await self._ready()
        return host.passivate_idle(older_than)

    async def resident(self) -> int:
        """Sessions in memory on this host."""
        host = await self._ready()
        return host.resident

    async def nudge_timers(self, session_id: str | None) -> None:
        """A schedule changed: this host's scheduler looks again now (``LocalHost.nudge_timers``)."""
        host = await self._ready()
        host.nudge_timers(session_id)

    async def close(self) -> None:
        """Detach every session (runs stay as committed) and close the store."""
        host = await self._ready()
        await host.close()
        if self._tree is not None:
            await self._tree.close()  # its streams only: keep_hosts leaves every host running
        if self._store is not None:
            await self._store.close()

    # -- events -------------------------------------------------------------------------------------

    async def client_stream(self, client_id: str) -> AsyncIterator[list[Item]]:
        """One client's event channel: batches of ``(subscription, session, event)`` for every session it reads.

        The stream never ends by itself; the client cancels it (and opens a new channel after an
        error: streams are never retried by Ray); its subscriptions end with it.
        """
        await self._ready()
        async for batch in self._channels.stream(client_id):
            yield batch

    async def subscribe(self, client_id: str, sub_id: str, session_id: str, after_seq: int) -> None:
        """Add a session to a client's channel: stored events after ``after_seq`` (-1: none), then live."""
        host = await self._ready()
        await self._channels.subscribe(host, client_id, sub_id, session_id, after_seq)

    async def keepalive(self, client_id: str) -> None:
        """A client's sign of life for its channel (see ``Channels.reap``)."""
        self._channels.keepalive(client_id)

    async def unsubscribe(self, client_id: str, sub_id: str) -> None:
        """Take one subscription off a channel (idempotent)."""
        self._channels.unsubscribe(client_id, sub_id)

    async def barrier(self, client_id: str, barrier_id: str) -> None:
        """Queue a marker behind everything already on the channel (see ``Channels.barrier``)."""
        self._channels.barrier(client_id, barrier_id)
