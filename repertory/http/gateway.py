"""``Gateway``: what the routes share, and everything about threads.

The HTTP layer is a client of the public runtime API: threads are created with
``Runtime.create_session`` (a LangGraph client may choose the thread id and attach metadata, both
of which it takes), copied with ``SessionHandle.fork``, amended (metadata, the first run's
assistant) with ``SessionHandle.amend`` and deleted with ``Runtime.delete_session``; sessions are
driven through ``SessionHandle`` (so every message and decision is stamped with the caller's
principal), and state is read from the store (``Runtime.store``). It writes nothing below the
runtime and keeps no durable state of its own.

Every thread lookup takes the caller: a thread another owner's key created is answered exactly
as one that does not exist (404), so ids cannot be probed across tenants. Searches and counts read
only the caller's own sessions, through the store's index by owner (``page_sessions(owner=)``):
another tenant's threads cost a tenant's search nothing, and their state is never loaded for it.

A client may name a new thread's id (``POST /threads``, a run with ``if_not_exists="create"``).
Such an id is 1 to 128 of ``A-Z a-z 0-9 . _ : -`` (``check_new_thread_id``: no ``/``, ``#``, ``?``
or space that a URL would cut or mislead; ids the server makes, ULIDs, uuids, ``cron-...``, all
fit), and existing threads with other ids stay readable and deletable. An id that is taken by
another owner's thread is answered exactly as an id with a prefix only the server gives
(``cron-``): 422, "thread_id ... cannot be used", the same sentence for both, so the answer never
says that another tenant has a thread there. (That some answer other than success is given for a
taken id cannot be helped while ids are one namespace; it tells no more than a reserved id does.)
The caller's own existing thread is 409 (``if_exists="raise"``) or returned (``"do_nothing"``).

A thread created without an assistant (agent-chat-ui creates threads with ``{"metadata": {}}``
and names the assistant only in the run) is a session on the first served agent marked unbound
(``views.UNBOUND``); its first run rebinds it to that run's assistant before the turn is queued,
and from then on its metadata shows ``graph_id`` and ``assistant_id``, as LangGraph's server
merges them in on each run.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import JsonValue

from repertory.core.history import MessageHistory
from repertory.core.ids import now_ms
from repertory.core.state import RunState
from repertory.core.store import DeletedRows
from repertory.core.timing import RESERVED_SESSION_PREFIXES, is_reserved_session_id
from repertory.core.tree import SessionRecord
from repertory.errors import SessionExists, SessionNotFound
from repertory.http.auth import Caller
from repertory.http.convert import lineage, message_dicts
from repertory.http.errors import HttpError
from repertory.http.views import (
    RESERVED_PREFIX,
    UNBOUND,
    ThreadStatus,
    interrupts_of,
    is_unbound,
    nested_wait,
    thread_metadata,
    thread_status,
    thread_view,
    values_view,
)
from repertory.runtime import Agent
from repertory.tree.runtime import Runtime

__all__ = ["NEW_THREAD_ID", "Gateway", "Snapshot", "check_new_thread_id", "contains"]

Dict = dict[str, Any]

NEW_THREAD_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
"""What a client-chosen thread id may be: safe in a URL path, a link and a log line as it is."""
_PAGE = 1_000
"""Sessions per page when a search reads an owner's sessions through the owner index."""


def check_new_thread_id(thread_id: str) -> str:
    """``thread_id`` if a client may give it to a new thread, else ``ValueError`` saying what an id may be."""
    if NEW_THREAD_ID.fullmatch(thread_id) is None:
        raise ValueError(
            f"thread_id {thread_id[:140]!r} is not a thread id: 1 to 128 letters, digits, '.', '_', ':' or '-'"
        )
    return thread_id


def _unusable(thread_id: str) -> HttpError:
    """The one answer to a new thread id that is taken by another owner's thread or has the server's prefix."""
    prefixes = ", ".join(repr(p) for p in RESERVED_SESSION_PREFIXES)
    return HttpError(
        f"thread_id {thread_id!r} cannot be used: ids in use by other threads and ids starting with "
        f"{prefixes} (the server's) are refused; choose another",
        status=422,
    )


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

    def named_agent(self, metadata: dict[str, JsonValue]) -> str | None:
        """The assistant ``metadata.graph_id`` or ``assistant_id`` names (404 if not served), or ``None``."""
        named = {v for k in ("graph_id", "assistant_id") if isinstance(v := metadata.get(k), str)}
        if len(named) > 1:
            raise HttpError("metadata.graph_id and metadata.assistant_id name different assistants", status=422)
        if not named:
            return None
        name = named.pop()
        self.agent(name)
        return name

    # -- threads ------------------------------------------------------------------------------------

    async def record(self, thread_id: str, caller: Caller) -> SessionRecord:
        """The session behind a thread id; 404 if there is none or the caller may not see it."""
        record = await self.store.load_session(thread_id) if _plausible(thread_id) else None
        if record is None or not caller.sees(record):
            raise HttpError(f"no thread {thread_id!r}", status=404)
        return record

    async def create_thread(
        self,
        caller: Caller,
        *,
        thread_id: str | None,
        metadata: dict[str, JsonValue] | None,
        if_exists: Literal["raise", "do_nothing"] | None,
        agent: str | None = None,
    ) -> SessionRecord:
        """A new root session owned by the caller (thread empty); ``if_exists="do_nothing"`` returns an existing one.

        Without an assistant (``agent`` or one named in the metadata) the thread is unbound: its
        first run binds it.
        """
        if thread_id is not None:
            try:
                check_new_thread_id(thread_id)
            except ValueError as exc:
                raise HttpError(str(exc), status=422) from None
            if is_reserved_session_id(thread_id):  # a cron's firing would land in it (``core.timing``)
                raise _unusable(thread_id)
        metadata = _settable(dict(metadata or {}))
        name = agent if agent is not None else self.named_agent(metadata)
        if name is None:
            name, metadata = next(iter(self.agents)), {**metadata, UNBOUND: True}
        try:
            handle = await self.runtime.create_session(
                agent=name, metadata=metadata, session_id=thread_id, owner=caller.owner, principal=caller.principal
            )
        except SessionExists:
            if thread_id is None:  # a fresh id that collided: nothing the client chose
                raise
            existing = await self.store.load_session(thread_id)
            if existing is None or not caller.sees(existing):
                # Another owner's: the answer a reserved id gets, never "it exists" (module docstring).
                raise _unusable(thread_id) from None
            if if_exists == "do_nothing":
                return existing
            raise HttpError(f"thread {thread_id!r} already exists", status=409) from None
        return handle.record

    async def bind(self, record: SessionRecord, assistant_id: str, caller: Caller) -> SessionRecord:
        """Bind an unbound thread to the assistant of its first run; a bound thread is returned as it is."""
        if not is_unbound(record):
            return record
        handle = await self.runtime.session(record.session_id, caller.principal)
        bound = {k: v for k, v in record.metadata.items() if k != UNBOUND}
        try:
            return await handle.amend(agent=assistant_id, metadata=bound)
        except ValueError:  # another request's first run got there first, with another assistant
            fresh = await self.record(record.session_id, caller)
            if is_unbound(fresh):
                raise
            return fresh

    async def patch_thread(
        self, record: SessionRecord, metadata: dict[str, JsonValue], caller: Caller
    ) -> SessionRecord:
        """Merge ``metadata`` into the thread's (keys it names are replaced, the rest stay), as LangGraph does.

        ``graph_id`` and ``assistant_id`` say which assistant the thread runs: a patch may repeat
        them, not change them (the thread's history was written by that agent).
        """
        patch = _settable(metadata)
        for key in ("graph_id", "assistant_id"):
            if key in patch and (is_unbound(record) or patch[key] != record.agent):
                raise HttpError(
                    f"metadata.{key} names the thread's assistant, which its first run chooses; it cannot be patched",
                    status=422,
                )
        handle = await self.runtime.session(record.session_id, caller.principal)
        return await handle.amend(metadata={**record.metadata, **patch})

    async def delete_thread(self, record: SessionRecord) -> DeletedRows:
        """Delete the thread's session with what it spawned (a running turn is cancelled first; forks stay)."""
        try:
            return await self.runtime.delete_session(record.session_id)
        except SessionNotFound:
            raise HttpError(f"no thread {record.session_id!r}", status=404) from None

    async def copy_thread(self, thread_id: str, caller: Caller) -> SessionRecord:
        """A fork: a new thread whose head is this thread's head (O(1): no message is copied); same owner."""
        source = await self.record(thread_id, caller)
        handle = await self.runtime.session(source.session_id, caller.principal)
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

    async def _matching(
        self,
        caller: Caller,
        *,
        metadata: Dict | None,
        values: Dict | None,
        ids: list[str] | None,
        status: str | None,
        with_status: bool,
    ) -> list[tuple[SessionRecord, ThreadStatus | None]]:
        """The threads the caller may see that match every filter: the caller's own sessions only (``visible``)."""
        records = await self.visible(caller, ids)
        if metadata:
            records = [r for r in records if contains(thread_metadata(r), metadata)]
        rows: list[tuple[SessionRecord, ThreadStatus | None]] = [(r, None) for r in records]
        if status is not None or with_status:
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
        return rows

    async def visible(self, caller: Caller, ids: list[str] | None = None) -> list[SessionRecord]:
        """The sessions the caller may see (of ``ids`` only, when given), oldest first.

        A tenant's are read through the store's index by owner, a page at a time, so another
        tenant's sessions are never read for it; ``ids`` are looked up one by one. An admin, and
        everyone on an open server, sees every session.
        """
        if ids is not None:
            found = [await self.store.load_session(i) for i in dict.fromkeys(ids) if _plausible(i)]
            records = [r for r in found if r is not None and caller.sees(r)]
            records.sort(key=lambda r: r.created_at)
            return records
        if caller.admin or caller.owner is None:
            return await self.store.list_sessions()
        newest_first: list[SessionRecord] = []
        while True:
            before = newest_first[-1].session_id if newest_first else None
            page = await self.store.page_sessions(owner=caller.owner, before=before, limit=_PAGE)
            if not page:  # not ``len(page) < _PAGE``: a row the store could not read leaves a page short
                return newest_first[::-1]
            newest_first += page

    async def search(
        self,
        caller: Caller,
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
        """Threads the caller may see matching every filter, sorted, one page."""
        rows = await self._matching(
            caller, metadata=metadata, values=values, ids=ids, status=status, with_status=sort_by == "status"
        )

        def key(row: tuple[SessionRecord, ThreadStatus | None]) -> Any:
            r, s = row
            if sort_by == "thread_id":
                return r.session_id
            if sort_by == "status":
                return s or ""
            return r.created_at if sort_by == "created_at" else r.updated_at

        rows.sort(key=key, reverse=descending)
        return [await self.thread_json(r) for r, _ in rows[offset : offset + limit]]

    async def count(self, caller: Caller, *, metadata: Dict | None, values: Dict | None, status: str | None) -> int:
        """How many threads ``search`` with these filters finds (every page)."""
        rows = await self._matching(
            caller, metadata=metadata, values=values, ids=None, status=status, with_status=False
        )
        return len(rows)


def _settable(metadata: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Client metadata, refusing the keys the server keeps for itself."""
    reserved = sorted(k for k in metadata if k.startswith(RESERVED_PREFIX))
    if reserved:
        raise HttpError(
            f"metadata keys starting with {RESERVED_PREFIX!r} are the server's: {', '.join(reserved)}", status=422
        )
    return metadata


def _plausible(thread_id: str) -> bool:
    """An id a store can look up (path parameters are not validated by the store's own rules)."""
    try:
        thread_id.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return 0 < len(thread_id) <= 256 and "\x00" not in thread_id
