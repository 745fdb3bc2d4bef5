"""``Runtime``: the session tree's entry point, on the local backend (Ray comes as another host).

    async with await Runtime.start(store="sqlite:///runs.db", agents={"assistant": agent}) as rt:
        root = await rt.create_session(agent="assistant")
        print((await root.run("hello")).text)

Starting a runtime finishes every turn a previous process left queued or running; closing it
stops work without cancelling anything, so the next start picks up exactly where this one stopped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from repertory.errors import SessionNotFound, StoreError
from repertory.runtime.agent import Agent
from repertory.runtime.handle import SessionHandle
from repertory.runtime.host import LocalHost
from repertory.runtime.memory import Memory
from repertory.runtime.principal import Principal
from repertory.runtime.tree import Lineage, Placement, SessionRecord
from repertory.storage.base import SessionStore, TreeStore

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
        agents: dict[str, Agent] | None = None,
        *,
        idle_timeout: float = 300.0,
        address: str | None = None,
        hosts: int = 2,
        max_in_flight: int = 256,
        host_options: dict[str, Any] | None = None,
        ray_init: dict[str, Any] | None = None,
        keep_hosts: bool | None = None,
        memory: Callable[[SessionRecord, TreeStore], Memory | None] | None = None,
    ) -> Runtime:
        """Open the store (a URL or an open store), start the host(s), and finish open turns.

        ``idle_timeout`` is how long an idle session stays in memory before it is passivated.
        ``backend="ray"``: ``address=None`` starts a local Ray instance (stopped again by
        ``close()``), an address joins a cluster (whose detached hosts outlive this runtime);
        ``hosts`` shared session hosts are found or created, ``max_in_flight`` bounds the calls this
        client pipelines, ``host_options`` are Ray actor options for the hosts (resources).
        ``keep_hosts`` (default: keep them when joining a cluster) leaves the detached hosts running
        at ``close()``. ``memory(session_record, store)`` gives a session its long-term memory when
        it is activated (e.g. ``lambda r, s: StoreMemory(s, resource=r.root_id)``); local backend.
        """
        if not agents:
            raise ValueError("a runtime needs at least one agent: agents={'name': Agent(...)}")
        if idle_timeout <= 0:
            raise ValueError("idle_timeout must be > 0 seconds")
        if backend not in ("local", "ray"):
            raise ValueError(f"backend must be 'local' or 'ray', not {backend!r}")
        if address is not None and backend != "ray":
            raise ValueError("address is for backend='ray'")
        if memory is not None and backend == "ray":
            raise ValueError("memory= is supported on backend='local' (Ray hosts do not take one yet)")
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
                    agents=agents,
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
        host = LocalHost(opened, agents, idle_timeout=idle_timeout, memory=memory)
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
