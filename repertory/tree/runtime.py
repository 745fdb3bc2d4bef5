"""``Runtime``: the session tree's entry point, on the local backend (Ray comes as another host).

    async with await Runtime.start(store="sqlite:///runs.db", agents={"assistant": agent}) as rt:
        root = await rt.create_session(agent="assistant")
        print((await root.run("hello")).text)

Starting a runtime finishes every turn a previous process left queued or running; closing it
stops work without cancelling anything, so the next start picks up exactly where this one stopped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from repertory.core.ids import new_id
from repertory.core.messages import ModelMessage
from repertory.core.principal import Message, Principal, to_model_message
from repertory.core.store import SessionStore, TreeStore
from repertory.core.tree import Lineage, Placement, SessionRecord, TurnKind
from repertory.errors import SessionNotFound, StoreError
from repertory.runtime.agent import Agent
from repertory.runtime.host import LocalHost, MemoryFactory
from repertory.tree.agent_specs import AgentSpec, resolve_agents
from repertory.tree.handle import SessionHandle, TurnHandle

if TYPE_CHECKING:
    from repertory.actors.client import RayHostClient

__all__ = ["Backend", "Runtime"]

Backend = Literal["local", "ray"]


class Runtime:
    """Sessions, handles and their host; create with ``await Runtime.start(...)``."""

    def __init__(self, store: TreeStore, host: LocalHost | RayHostClient, backend: Backend, owns_store: bool) -> None:
        self._store = store
        self._host = host
        self.backend: Backend = backend
        self._owns_store = owns_store
        self._background: set[asyncio.Task[Any]] = set()
        self._closed = False

    @classmethod
    async def start(
        cls,
        store: str | SessionStore = "sqlite:///repertory.db",
        backend: Backend = "local",
        agents: Mapping[str, AgentSpec] | None = None,
        *,
        idle_timeout: float = 300.0,
        address: str | None = None,
        hosts: int = 2,
        max_in_flight: int = 256,
        host_options: dict[str, Any] | None = None,
        ray_init: dict[str, Any] | None = None,
        keep_hosts: bool | None = None,
        memory: MemoryFactory | None = None,
    ) -> Runtime:
        """Open the store (a URL or an open store), start the host(s), and finish open turns.

        ``idle_timeout`` is how long an idle session stays in memory before it is passivated.
        ``backend="ray"``: ``address=None`` starts a local Ray instance (stopped again by
        ``close()``), an address joins a cluster (whose detached hosts outlive this runtime);
        ``hosts`` shared session hosts are found or created, ``max_in_flight`` bounds the calls this
        client pipelines, ``host_options`` are Ray actor options for the hosts (resources).
        ``keep_hosts`` (default: keep them when joining a cluster) leaves the detached hosts running
        at ``close()``. ``memory(session_record, store)`` gives a session its long-term memory when
        it is activated (e.g. ``lambda r, s: StoreMemory(s, resource=r.root_id)``); on Ray it is
        pickled to every host. ``agents`` maps names to agents or ``module:attr`` paths (see
        ``repertory.tree.agent_specs``: on Ray a path is imported by each host itself).
        """
        if not agents:
            raise ValueError("a runtime needs at least one agent: agents={'name': Agent(...)}")
        if idle_timeout <= 0:
            raise ValueError("idle_timeout must be > 0 seconds")
        if backend not in ("local", "ray"):
            raise ValueError(f"backend must be 'local' or 'ray', not {backend!r}")
        if address is not None and backend != "ray":
            raise ValueError("address is for backend='ray'")
        specs = dict(agents)
        resolved = resolve_agents(specs)
        owns = isinstance(store, str)
        opened: SessionStore
        if isinstance(store, str):
            from repertory.storage.url import open_store

            opened = await open_store(store)
        else:
            opened = store
        if not isinstance(opened, TreeStore):
            if owns:
                await opened.close()
            raise StoreError(f"{type(opened).__name__} does not hold sessions, turns and events (a TreeStore)")
        if backend == "ray":
            from repertory.actors.bootstrap import start_ray_client

            try:
                client = await start_ray_client(
                    store=opened,
                    store_url=store if isinstance(store, str) else None,
                    agents=resolved,
                    agent_specs=specs,
                    memory=memory,
                    address=address,
                    hosts=hosts,
                    idle_timeout=idle_timeout,
                    max_in_flight=max_in_flight,
                    host_options=host_options,
                    ray_init=ray_init,
                    keep_hosts=keep_hosts,
                )
            except BaseException:
                if owns:
                    await opened.close()
                raise
            return cls(opened, client, backend, owns)
        host = LocalHost(opened, resolved, idle_timeout=idle_timeout, memory=memory)
        runtime = cls(opened, host, backend, owns)
        try:
            await host.start()
        except BaseException:
            await runtime.close()
            raise
        return runtime

    @property
    def store(self) -> TreeStore:
        """The store this runtime runs on."""
        return self._store

    @property
    def agents(self) -> dict[str, Agent]:
        """The agents this runtime runs, by name (a copy: registering happens at ``start``)."""
        return dict(self._host.agents)

    @property
    def host(self) -> LocalHost | RayHostClient:
        """The host of the session actors (passivation knobs, resident count)."""
        return self._host

    async def create_session(
        self,
        agent: str,
        title: str | None = None,
        model: str | None = None,
        cwd: str | None = None,
        *,
        principal: Principal | None = None,
        placement: Placement = "shared",
    ) -> SessionHandle:
        """A new root session running ``agent`` (a name given to ``Runtime.start``).

        ``placement="dedicated"`` (Ray backend) gives the session a Ray actor of its own.
        """
        if placement == "dedicated" and self.backend != "ray":
            raise ValueError("placement='dedicated' needs backend='ray'")
        record = await self._host.create_session(
            agent=agent,
            title=title,
            model=model,
            cwd=cwd,
            lineage=Lineage(kind="root"),
            root_id=None,
            head=None,
            placement=placement,
        )
        return SessionHandle(self, record, principal or Principal.user())

    async def create_sessions(
        self,
        agent: str,
        count: int,
        title: str | None = None,
        model: str | None = None,
        cwd: str | None = None,
        *,
        principal: Principal | None = None,
    ) -> list[SessionHandle]:
        """``count`` new root sessions at once: on Ray one call per host per 1,000, not one per session."""
        if count < 0:
            raise ValueError("count must be >= 0")
        specs: list[dict[str, Any]] = [
            {
                "agent": agent,
                "title": title,
                "model": model,
                "cwd": cwd,
                "lineage": Lineage(kind="root"),
                "root_id": None,
                "head": None,
                "session_id": new_id(),
            }
            for _ in range(count)
        ]
        records: list[SessionRecord] = await self._host.create_sessions(specs)
        who = principal or Principal.user()
        return [SessionHandle(self, record, who) for record in records]

    async def send_many(self, items: Sequence[tuple[SessionHandle, Message]]) -> list[TurnHandle]:
        """Queue one message on each of many sessions (enqueued behind any running turn), in bulk.

        Each turn is durable when this returns, as with ``send``; on Ray the sends travel in one
        call per host per batch and are deduplicated by their submission ids if retried.
        """
        batch: list[tuple[str, ModelMessage, TurnKind, str]] = []
        for handle, message in items:
            model_message, kind = to_model_message(message, handle.principal)
            batch.append((handle.id, model_message, kind, new_id()))
        await self._host.send_many(batch)
        return [TurnHandle(self, session_id, submission_id) for session_id, _, _, submission_id in batch]

    async def session(self, session_id: str, principal: Principal | None = None) -> SessionHandle:
        """A handle to an existing session (one read); ``SessionNotFound`` if it does not exist."""
        record = await self._store.load_session(session_id)
        if record is None:
            raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
        return SessionHandle(self, record, principal or Principal.user())

    async def close(self) -> None:
        """Stop the host (runs stay as committed) and close the store if this runtime opened it."""
        if self._closed:
            return
        self._closed = True
        for task in list(self._background):
            task.cancel()
        await self._host.close()
        if self._owns_store:
            await self._store.close()

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
