"""``Gateway``: what the routes share, and everything about threads.

The HTTP layer is a client of the public runtime API: threads are created with
``Runtime.create_session`` (a LangGraph client may choose the thread id and attach metadata, both
of which it takes) and copied with ``SessionHandle.fork``, sessions are driven through
``SessionHandle`` (so every message and decision is stamped with the caller's principal), and
state is read from the store (``Runtime.store``). It writes nothing below the runtime and keeps no
durable state of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import JsonValue

from repertory.core.history import MessageHistory
from repertory.core.ids import now_ms
from repertory.core.state import RunState
from repertory.core.tree import SessionRecord
from repertory.errors import SessionExists
from repertory.http.convert import lineage, message_dicts
from repertory.http.errors import HttpError
from repertory.http.views import (
    ThreadStatus,
    interrupts_of,
    nested_wait,
    thread_metadata,
    thread_status,
    thread_view,
    values_view,
)
from repertory.runtime.agent import Agent
from repertory.tree.runtime import Runtime

__all__ = ["Gateway", "Snapshot", "contains"]

Dict = dict[str, Any]


def contains(actual: Any, wanted: Any) -> bool:
    """JSON containment (PostgreSQL's ``@>``): every key of ``wanted`` is in ``actual`` with a containing value."""
    if isinstance(wanted, dict):
        return isinstance(actual, dict) and all(k in actual and contains(actual[k], v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return isinstance(actual, list) and all(any(contains(a, w) for a in actual) for w in wanted)
    return bool(actual == wanted)


@dataclass(frozen=True)
class Snapshot:
    """One consistent-enough read of a thread: its row, status, latest run and history at the head.

    ``nested`` is a descendant's suspended run (and its session) that a busy thread waits for: a
    delegated child waiting for a human. The thread then shows that interrupt as its own.
    """

    record: SessionRecord
    status: ThreadStatus
    run: RunState | None
    history: MessageHistory | None
    nested: tuple[RunState, SessionRecord] | None = None

    def messages(self) -> list[Dict]:
        """The head's messages as LangChain dicts."""
        if self.history is None:
            return []
        return [m for _, entry in lineage(self.history) for m in message_dicts(entry.id, entry.message)]


class Gateway:
    """The runtime as the HTTP routes see it: agents, threads, and background work."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.store = runtime.store
        self.agents = runtime.agents
        self.started_at = now_ms()
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- background work ----------------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` in the background, keeping a reference until it ends."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def close(self) -> None:
        """Stop background work (durable state is untouched: turns resume with the runtime)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- agents -------------------------------------------------------------------------------------

    def agent(self, name: str) -> Agent:
        """The agent served as assistant ``name``; 404 if there is none."""
        agent = self.agents.get(name)
        if agent is None:
            raise HttpError(f"no assistant {name!r} (served: {', '.join(self.agents)})", status=404)
        return agent

    def default_agent(self, metadata: dict[str, JsonValue]) -> str:
        """The assistant a new thread runs: ``metadata.graph_id`` or ``assistant_id``, else the first served."""
        named = {v for k in ("graph_id", "assistant_id") if isinstance(v := metadata.get(k), str)}
        if len(named) > 1:
            raise HttpError("metadata.graph_id and metadata.assistant_id name different assistants", status=422)
        if named:
            name = named.pop()
            self.agent(name)
            return name
        return next(iter(self.agents))

    # -- threads ------------------------------------------------------------------------------------

    async def record(self, thread_id: str) -> SessionRecord:
        """The session behind a thread id; 404 if there is none."""
        record = await self.store.load_session(thread_id) if _plausible(thread_id) else None
        if record is None:
            raise HttpError(f"no thread {thread_id!r}", status=404)
        return record

    async def create_thread(
        self,
        *,
        thread_id: str | None,
        metadata: dict[str, JsonValue] | None,
        if_exists: Literal["raise", "do_nothing"] | None,
        agent: str | None = None,
    ) -> SessionRecord:
        """A new root session (its thread is empty); ``if_exists="do_nothing"`` returns an existing one."""
        metadata = dict(metadata or {})
        name = agent if agent is not None else self.default_agent(metadata)
        try:
            handle = await self.runtime.create_session(agent=name, metadata=metadata, session_id=thread_id)
        except SessionExists:
            existing = await self.store.load_session(thread_id) if thread_id is not None else None
            if existing is not None and if_exists == "do_nothing":
                return existing
            raise HttpError(f"thread {thread_id!r} already exists", status=409) from None
        return handle.record

    async def copy_thread(self, thread_id: str) -> SessionRecord:
        """A fork: a new thread whose head is this thread's head (O(1): no message is copied)."""
        source = await self.record(thread_id)
        handle = await self.runtime.session(source.session_id)
        child = await handle.fork(title=source.title, metadata=source.metadata)
        return child.record

    async def head(self, thread_id: str) -> str | None:
        """The thread's head revision (its latest checkpoint id), ``None`` while it is empty."""
        thread = await self.store.load_thread(thread_id)
        return None if thread is None else thread.history_revision_id

    async def snapshot(self, record: SessionRecord) -> Snapshot:
        """Status, latest run and history of a thread."""
        status, run = await thread_status(self.store, record)
        nested = await nested_wait(self.store, record.session_id) if status == "busy" else None
        head = await self.head(record.session_id)
        history = await self.store.load_history(head) if head is not None else None
        return Snapshot(record, "interrupted" if nested else status, run, history, nested)

    def interrupt_source(self, snap: Snapshot) -> tuple[RunState | None, Agent | None]:
        """The run whose interrupt the thread shows (its own, or a delegated child's) and that run's agent."""
        if snap.nested is not None:
            run, record = snap.nested
            return run, self.agents.get(record.agent)
        return snap.run, self.agents.get(snap.record.agent)

    def values(self, snap: Snapshot) -> Dict:
        """Thread values: messages, and ``__interrupt__`` while a human is awaited."""
        return values_view(snap.messages(), interrupts_of(*self.interrupt_source(snap)))

    async def thread_json(self, record: SessionRecord) -> Dict:
        """A thread as the LangGraph API returns it."""
        snap = await self.snapshot(record)
        return thread_view(record, snap.status, self.values(snap))

    async def search(
        self,
        *,
        metadata: Dict | None,
        values: Dict | None,
        ids: list[str] | None,
        status: str | None,
        sort_by: str,
        descending: bool,
        offset: int,
        limit: int,
    ) -> list[Dict]:
        """Threads matching every filter, sorted, one page (reads every session row: O(sessions))."""
        records = await self.store.list_sessions()
        if ids is not None:
            wanted = set(ids)
            records = [r for r in records if r.session_id in wanted]
        if metadata:
            records = [r for r in records if contains(thread_metadata(r), metadata)]
        rows: list[tuple[SessionRecord, ThreadStatus | None]] = [(r, None) for r in records]
        if status is not None or sort_by == "status":
            rows = [(r, (await thread_status(self.store, r))[0]) for r in records]
            if status is not None:
                rows = [(r, s) for r, s in rows if s == status]
        if values:
            kept = []
            for r, s in rows:
                snap = await self.snapshot(r)
                if contains(self.values(snap), values):
                    kept.append((r, s))
            rows = kept

        def key(row: tuple[SessionRecord, ThreadStatus | None]) -> Any:
            r, s = row
            if sort_by == "thread_id":
                return r.session_id
            if sort_by == "status":
                return s or ""
            return r.created_at if sort_by == "created_at" else r.updated_at

        rows.sort(key=key, reverse=descending)
        return [await self.thread_json(r) for r, _ in rows[offset : offset + limit]]


def _plausible(thread_id: str) -> bool:
    """An id a store can look up (path parameters are not validated by the store's own rules)."""
    try:
        thread_id.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return 0 < len(thread_id) <= 256 and "\x00" not in thread_id
