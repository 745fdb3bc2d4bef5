"""``Runtime``: the session tree's entry point, on any backend (``local`` by default, ``ray``, or one registered).

    async with await Runtime.start(store="sqlite:///runs.db", agents={"assistant": agent}) as rt:
        root = await rt.create_session(agent="assistant")
        print((await root.run("hello")).text)

Starting a runtime finishes every turn a previous process left queued or running; closing it
stops work without cancelling anything, so the next start picks up exactly where this one stopped.
The runtime reads the store itself and sends every change through its ``SessionBackend``
(``repertory.runtime.backend``), found by name in ``repertory.tree.backends``: nothing here knows
which backend it runs on, nor any backend's own options (it hands them over untouched).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from pydantic import JsonValue

from repertory.core.budget import Budget, BudgetStore, tree_scope
from repertory.core.clock import Clock, SystemClock
from repertory.core.ids import new_id
from repertory.core.memory import MemoryFactory
from repertory.core.principal import Message, Principal, to_model_message
from repertory.core.protocols import protocol_gap
from repertory.core.store import DeletedRows, SessionStore, TreeStore
from repertory.core.timing import FiringWebhook
from repertory.core.tree import NewSession, Placement
from repertory.errors import ScheduleNotFound, SessionNotFound, StoreError
from repertory.runtime.agent import Agent
from repertory.runtime.backend import SessionBackend, Submission
from repertory.runtime.host import LocalHost
from repertory.tree.agent_specs import AgentSpec, resolve_agents
from repertory.tree.backends import BackendConfig, BackendOptions, load_backend
from repertory.tree.handle import SessionHandle, TurnHandle
from repertory.tree.schedules import Schedule, new_schedule, time_store

__all__ = ["Backend", "Runtime"]

Backend = str
"""The name of a backend: ``"local"``, ``"ray"``, or any name ``repertory.tree.backends`` knows."""


def _backend_options(given: BackendOptions | None, keywords: dict[str, Any]) -> BackendOptions:
    """The backend's options as ``start`` received them: one mapping, or the options object alone."""
    if given is None:
        return keywords
    if isinstance(given, Mapping):
        twice = sorted(set(given) & set(keywords))
        if twice:
            raise TypeError(f"backend option(s) given twice, as keywords and in backend_options: {', '.join(twice)}")
        return {**given, **keywords}
    if keywords:
        raise TypeError(
            f"keyword option(s) {', '.join(sorted(keywords))} beside backend_options={type(given).__name__}(...):"
            " give the backend's options one way"
        )
    return given


class Runtime:
    """Sessions, handles and their backend; create with ``await Runtime.start(...)``."""

    def __init__(
        self, store: TreeStore, host: SessionBackend, backend: Backend, owns_store: bool, clock: Clock | None = None
    ) -> None:
        self._store = store
        self.clock: Clock = clock if clock is not None else SystemClock()
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
        memory: MemoryFactory | None = None,
        clock: Clock | None = None,
        poll_interval: float = 5.0,
        recover: bool = True,
        backend_options: BackendOptions | None = None,
        **options: Any,
    ) -> Runtime:
        """Open the store (a URL or an open store), start the backend, and finish open turns.

        ``backend`` names a backend (``repertory.tree.backends``): an unknown name raises
        ``ValueError`` listing the known ones, and a backend whose extra is not installed raises
        ``ImportError`` naming it (``pip install 'repertory[ray]'``), both before the store opens.
        ``idle_timeout`` is how long an idle session stays in memory before it is passivated.

        Options of the backend's own: ``backend_options`` (its options object, such as
        ``repertory.actors.RayOptions``, or a mapping) and any keyword not named here
        (``Runtime.start(backend="ray", address=None, hosts=4)``) go to the backend as given, which
        validates them and refuses, naming them, those it does not know (``TypeError``): the
        ``local`` backend takes none, the ``ray`` backend's are ``RayOptions``' fields. A keyword
        and a ``backend_options`` mapping may not name one option twice; keywords beside an
        options object are refused (give one or the other).

        ``memory(session_record, store)`` gives a session its long-term memory when it is
        activated (e.g. ``lambda r, s: StoreMemory(s, resource=r.root_id)``); a backend of several
        processes pickles it to each. ``recover=False`` starts without finishing open turns or
        waking timers: for a second process on the same store that reads while another process
        runs the fleet (two processes re-driving one turn would run it twice over). A decision it
        makes drives that run on here, to its rest, so it decides only for sessions the other
        process does not hold: decide the fleet's approvals in the process that runs them (its
        HTTP API or web UI, ``repertory.http``; docs/concepts/session-tree.md). A backend whose hosts recover
        by themselves (Ray's) is not changed by it. ``agents`` maps names to agents or
        ``module:attr`` paths (see ``repertory.tree.agent_specs``: on Ray a path is imported by
        each host itself).
        """
        if not agents:
            raise ValueError("a runtime needs at least one agent: agents={'name': Agent(...)}")
        if idle_timeout <= 0:
            raise ValueError("idle_timeout must be > 0 seconds")
        factory = load_backend(backend)
        given = _backend_options(backend_options, options)
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
            raise StoreError(f"{protocol_gap(opened, TreeStore)} (a runtime's store holds sessions, turns and events)")
        config = BackendConfig(
            store=opened,
            store_url=store if isinstance(store, str) else None,
            agents=resolved,
            agent_specs=specs,
            idle_timeout=idle_timeout,
            memory=memory,
            clock=clock,
            poll_interval=poll_interval,
            recover=recover,
            options=given,
        )
        try:
            host = await factory(config)
        except BaseException:
            if owns:
                await opened.close()
            raise
        return cls(opened, host, backend, owns, clock)

    @property
    def store(self) -> TreeStore:
        """The store this runtime runs on."""
        return self._store

    @property
    def agents(self) -> dict[str, Agent]:
        """The agents this runtime runs, by name (a copy: registering happens at ``start``)."""
        return dict(self._host.agents)

    @property
    def host(self) -> SessionBackend:
        """The backend hosting the session actors (what handles call; passivation knobs, resident count)."""
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
        metadata: Mapping[str, JsonValue] | None = None,
        session_id: str | None = None,
        owner: str | None = None,
        budget: Budget | None = None,
    ) -> SessionHandle:
        """A new root session running ``agent`` (a name given to ``Runtime.start``).

        ``metadata`` is free-form JSON kept on the session's record (``handle.record.metadata``;
        the HTTP server keeps a thread's metadata there). ``session_id`` chooses the id (a client
        that names its threads); one that a session or thread already has raises
        ``SessionExists`` and changes nothing. ``placement="dedicated"`` gives the session a
        process of its own, on a backend that has them (Ray's: an actor of its own; the local
        backend refuses it with ``ValueError``). ``owner`` names who the session belongs to (the HTTP
        server's tenant, the owner of the API key that created it); its children and forks
        inherit it, and it never changes. ``budget`` caps what the whole tree may spend: every run
        of this session and of every spawned, delegated or forked descendant counts against it
        (``repertory.Budget``; ``handle.budget()`` reads it with the spend so far).
        """
        spec = NewSession(
            session_id=session_id if session_id is not None else new_id(),
            agent=agent,
            title=title,
            model=model,
            cwd=cwd,
            placement=placement,
            metadata=dict(metadata or {}),
            owner=owner,
        )
        if budget is not None:
            # Before the session: its first run must find the ledger (a creation that fails after
            # this leaves a ledger nobody spends against, which deleting the id would drop).
            await self.set_budget(tree_scope(spec.session_id), budget)
        record = await self._host.create_session(spec)
        return SessionHandle(self, record, principal or Principal.user())

    async def set_budget(self, scope: str, budget: Budget | None) -> None:
        """Set (or, with ``None``, remove) the budget of a ledger scope: ``owner_scope(name)``, ``tree_scope(root)``.

        An owner's budget caps everything that owner's sessions spend from now on (the HTTP
        server's ``--budget owner=...``); set again, it keeps what was spent so far. A session
        already running sees a budget from its next turn on the local backend; on Ray, a host's
        live session from its next activation (a host passivates an idle session after its
        ``idle_timeout``): set budgets before the sessions they cover start, as ``create_session``
        and ``repertory serve --budget`` do.
        """
        if not isinstance(self._store, BudgetStore):
            raise ValueError(f"{type(self._store).__name__} keeps no budgets (it is not a BudgetStore)")
        await self._store.set_budget(scope, budget)
        if isinstance(self._host, LocalHost):
            await self._host.budget_set(scope)  # its live sessions check it from their next turn

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
        specs = [NewSession(agent=agent, title=title, model=model, cwd=cwd) for _ in range(count)]
        records = await self._host.create_sessions(specs)
        who = principal or Principal.user()
        return [SessionHandle(self, record, who) for record in records]

    async def send_many(self, items: Sequence[tuple[SessionHandle, Message]]) -> list[TurnHandle]:
        """Queue one message on each of many sessions (enqueued behind any running turn), in bulk.

        Each turn is durable when this returns, as with ``send``; on Ray the sends travel in one
        call per host per batch and are deduplicated by their submission ids if retried.
        """
        batch: list[Submission] = []
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

    # -- schedules ----------------------------------------------------------------------------------

    async def create_schedule(
        self,
        cron: str,
        message: Message,
        *,
        agent: str | None = None,
        session_id: str | None = None,
        tz: str = "UTC",
        principal: Principal | None = None,
        end_at: int | None = None,
        enabled: bool = True,
        metadata: Mapping[str, JsonValue] | None = None,
        owner: str | None = None,
        webhook: FiringWebhook | None = None,
    ) -> Schedule:
        """A cron schedule: every fire time sends ``message`` as one durable turn.

        With ``session_id`` the turns go to that session (``handle.schedule`` is this); without,
        each firing creates a session of ``agent`` of its own (LangGraph's stateless crons), owned
        by ``owner`` (the HTTP server passes the cron creator's, so its tenancy holds).
        ``principal`` stamps the message's origin (default: the user); ``webhook`` gives every
        firing's run a completion webhook row (``FiringWebhook``). A malformed expression, an
        unknown time zone or agent raises ``ValueError``; an unknown session ``SessionNotFound``.
        """
        store = time_store(self)
        if session_id is not None:
            record = await self._store.load_session(session_id)
            if record is None:
                raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
            agent = record.agent
        if agent is None or agent not in self._host.agents:
            known = ", ".join(sorted(self._host.agents))
            raise ValueError(f"a schedule needs the agent it runs, one of: {known} (got {agent!r})")
        model_message, kind = to_model_message(message, principal or Principal.user())
        row = new_schedule(
            now=self.clock.now_ms(),
            session_id=session_id,
            agent=agent,
            cron=cron,
            message=model_message,
            kind=kind,
            tz=tz,
            end_at=end_at,
            enabled=enabled,
            metadata=dict(metadata or {}),
            owner=owner,
            webhook=webhook,
        )
        await store.add_schedule(row)
        self._host.nudge_timers(session_id)
        return Schedule(self, row)

    async def schedules(self, session_id: str | None = None, *, owner: str | None = None) -> list[Schedule]:
        """Every schedule (of one session, of one owner), oldest first."""
        return [Schedule(self, r) for r in await time_store(self).list_schedules(session_id, owner=owner)]

    async def schedule(self, schedule_id: str) -> Schedule:
        """One schedule by id; ``ScheduleNotFound`` if it was cancelled or never existed."""
        record = await time_store(self).load_schedule(schedule_id)
        if record is None:
            raise ScheduleNotFound(f"no schedule {schedule_id!r}", schedule_id=schedule_id)
        return Schedule(self, record)

    async def delete_session(self, session_id: str, *, forks: bool = False) -> DeletedRows:
        """Delete a session with its spawned descendants: runs, turns, events, memory records of their threads.

        Each session's actor is stopped on its host first (a running turn is cancelled, queued
        ones never run, a pending approval dies), parents before children; then the store deletes
        every row in one transaction. History another session's lineage still uses stays; the
        rest is collected. Forks are independent conversations: they survive whole (their lineage
        still names the deleted parent, whose ``parent()`` then raises ``SessionNotFound``), and
        so does everything below them. ``forks=True`` deletes every descendant, forks included
        (what retention does with an idle tree). ``SessionNotFound`` if there is no such session.
        """
        record = await self._store.load_session(session_id)
        if record is None:
            raise SessionNotFound(f"no session {session_id!r}", session_id=session_id)
        doomed = [record.session_id]
        frontier = [record.session_id]
        while frontier:  # breadth first: every parent is stopped before its children
            found = []
            for parent_id in frontier:
                for child in await self._store.list_children(parent_id):
                    if forks or child.lineage.kind == "spawned":
                        found.append(child.session_id)
            doomed.extend(found)
            frontier = found
        return await self._host.delete_sessions(doomed)

    async def close(self) -> None:
        """Stop the backend (runs stay as committed) and close the store if this runtime opened it."""
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
