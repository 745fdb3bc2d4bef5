"""What the pages show, read from the store: session rows, a session's runs and tree, the inbox, attention.

Every read is bounded: the sessions list is one keyset page (``TreeStore.page_sessions``) plus a
few indexed reads per row; the tree around a session stops at ``TREE_LIMIT`` sessions; the inbox
reads the suspended runs (each is a human's to-do, so there are as many as people can act on);
plots read the latest ``ACTIVITY_RUNS`` runs. Resume tokens are read (the server holds the store)
but never leave this process: pages name a call by its run and tool call id.

Tenancy: the reads that gather sessions (the tree, the inbox, the plots' runs) take the viewer's
``sees`` and leave out what it may not see; the sessions list filters by owner in the store query.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from repertory.core.history import MessageHistory
from repertory.core.state import PendingCall, RunState, Usage
from repertory.core.store import TreeStore
from repertory.core.tree import SessionRecord, SessionStatus, TurnRecord

__all__ = [
    "ACTIVITY_RUNS",
    "TREE_LIMIT",
    "Sees",
    "InboxItem",
    "SessionRow",
    "TreeNode",
    "inbox",
    "session_row",
    "session_rows",
    "session_tree",
    "stale_runs",
    "subtree_open",
    "thread_history",
    "visible_runs",
]

TREE_LIMIT = 200
ACTIVITY_RUNS = 2000
Sees = Callable[[SessionRecord | None], bool]
"""Whether the viewer may see a session (``Viewer.sees``); a missing session is seen by nobody."""


@dataclass
class SessionRow:
    """One session as a list row: its record, status, latest run and usage over all its runs."""

    record: SessionRecord
    status: SessionStatus
    latest: RunState | None
    usage: Usage
    cost: float | None
    runs: list[RunState] = field(default_factory=list)  # newest first


def _status(runs: list[RunState], open_turns: list[TurnRecord]) -> SessionStatus:
    """The store's rule (``TreeStore.page_sessions``) applied to one session's rows."""
    if open_turns:
        return "running"
    latest = runs[0] if runs else None
    if latest is not None and latest.status in ("suspended", "error"):
        return latest.status
    return "idle"


def _cost(runs: list[RunState]) -> float | None:
    costs = [r.cost for r in runs if r.cost is not None]
    return sum(costs) if costs else None


async def session_row(store: TreeStore, record: SessionRecord) -> SessionRow:
    """A session's row: its runs (newest first) and whether a turn is open."""
    runs, open_turns = await asyncio.gather(
        store.list_runs(record.session_id), store.list_turns(record.session_id, ["queued", "running"])
    )
    usage = sum((r.usage for r in runs), Usage())
    return SessionRow(record, _status(runs, open_turns), runs[0] if runs else None, usage, _cost(runs), runs)


async def session_rows(store: TreeStore, records: list[SessionRecord]) -> list[SessionRow]:
    """Rows for a page of sessions, read concurrently."""
    return list(await asyncio.gather(*(session_row(store, r) for r in records)))


async def thread_history(store: TreeStore, session_id: str) -> MessageHistory | None:
    """The session's history at its head, or ``None`` while it is empty."""
    thread = await store.load_thread(session_id)
    head = None if thread is None else thread.history_revision_id
    return None if head is None else await store.load_history(head)


@dataclass
class TreeNode:
    """A session in the spawn/fork tree, with its own usage and its subtree's."""

    row: SessionRow
    depth: int
    children: list[TreeNode] = field(default_factory=list)
    tree_usage: Usage = field(default_factory=Usage)
    tree_cost: float | None = None


async def session_tree(store: TreeStore, root_id: str, sees: Sees) -> tuple[list[TreeNode], bool]:
    """The tree under ``root_id`` in display order (depth first), and whether it was cut at ``TREE_LIMIT``.

    Only sessions ``sees`` admits are in it (children and forks inherit their owner, so for an
    owner's key that is the whole tree; the check keeps another owner's session out regardless).
    """
    root = await store.load_session(root_id)
    if root is None or not sees(root):
        return [], False
    top = TreeNode(await session_row(store, root), 0)
    order = [top]
    frontier = [top]
    cut = False
    while frontier and not cut:
        nxt: list[TreeNode] = []
        children = await asyncio.gather(*(store.list_children(n.row.record.session_id) for n in frontier))
        for node, found in zip(frontier, children, strict=True):
            kids = [kid for kid in found if sees(kid)]
            room = TREE_LIMIT - len(order)
            if len(kids) > room:
                kids, cut = kids[: max(room, 0)], True
            rows = await session_rows(store, kids)
            node.children = [TreeNode(row, node.depth + 1) for row in rows]
            order.extend(node.children)
            nxt.extend(node.children)
        frontier = nxt

    def roll(node: TreeNode) -> tuple[Usage, float | None]:
        usage, cost = node.row.usage, node.row.cost
        for child in node.children:
            u, c = roll(child)
            usage = usage + u
            cost = c if cost is None else cost + (c or 0.0)
        node.tree_usage, node.tree_cost = usage, cost
        return usage, cost

    roll(top)
    shown: list[TreeNode] = []

    def walk(node: TreeNode) -> None:
        shown.append(node)
        for child in node.children:
            walk(child)

    walk(top)
    return shown, cut


def subtree_open(tree: list[TreeNode], session_id: str) -> bool:
    """Whether the session or a descendant of it in ``tree`` has a turn to cancel: queued, running or waiting.

    Read from the rows ``session_tree`` already holds (``running``: a turn queued or running;
    ``suspended``: the latest run waits for a human), so the panel's Cancel button costs no read.
    """
    found = [node for node in tree if node.row.record.session_id == session_id]
    pending = found[:1]
    while pending:
        node = pending.pop()
        if node.row.status in ("running", "suspended"):
            return True
        pending.extend(node.children)
    return False


@dataclass
class InboxItem:
    """A pending approval or suspension: the call, its run, its session and that session's root."""

    run: RunState
    call: PendingCall
    live: bool  # the call the run's token decides now (others of the step wait their turn)
    session: SessionRecord
    root: SessionRecord | None


async def inbox(store: TreeStore, sees: Sees, session_id: str | None = None) -> list[InboxItem]:
    """Every pending approval and suspension the viewer ``sees`` (of one session's tree, or of all), oldest first.

    A session's inbox holds its descendants' too (up to ``TREE_LIMIT`` sessions): a delegated
    child's approval holds the parent's turn, so the person at the parent is the one to answer it
    (as ``SessionHandle.pending_approvals(tree=True)`` lists them).
    """
    if session_id is None:
        runs = await store.list_runs(None, statuses=["suspended"])
    else:
        subtree = await _subtree(store, session_id)
        found = await asyncio.gather(*(store.list_runs(s, statuses=["suspended"]) for s in subtree))
        runs = [run for listed in found for run in listed]
    records: dict[str, SessionRecord | None] = {}

    async def record(sid: str) -> SessionRecord | None:
        if sid not in records:
            records[sid] = await store.load_session(sid)
        return records[sid]

    items: list[InboxItem] = []
    for run in runs:
        session = await record(run.thread_id)
        if session is None or run.suspended_on is None or not sees(session):
            continue  # a bare Session's run (no session, so no handle to decide it with), or another owner's
        root = session if session.root_id == session.session_id else await record(session.root_id)
        live = run.suspended_on.tool_call_id
        for call in run.pending:
            items.append(InboxItem(run, call, call.tool_call_id == live, session, root))
    items.sort(key=lambda i: (i.call.requested_at, i.run.run_id, not i.live))
    return items


async def _subtree(store: TreeStore, session_id: str) -> list[str]:
    """The session and its descendants, breadth-first, at most ``TREE_LIMIT`` of them."""
    order, frontier = [session_id], [session_id]
    while frontier and len(order) < TREE_LIMIT:
        levels = await asyncio.gather(*(store.list_children(s) for s in frontier))
        frontier = [r.session_id for level in levels for r in level][: TREE_LIMIT - len(order)]
        order.extend(frontier)
    return order


async def stale_runs(store: TreeStore, older_than_ms: int, now: int) -> list[RunState]:
    """Runs still ``running`` whose last checkpoint is older than ``older_than_ms`` (oldest first)."""
    runs = await store.list_runs(statuses=["running"])
    return sorted((r for r in runs if now - r.updated_at >= older_than_ms), key=lambda r: r.updated_at)


async def visible_runs(store: TreeStore, runs: list[RunState], sees: Sees) -> list[RunState]:
    """The runs whose session the viewer ``sees`` (each distinct session read once, concurrently)."""
    threads = sorted({r.thread_id for r in runs})
    records = await asyncio.gather(*(store.load_session(t) for t in threads))
    shown = {t for t, record in zip(threads, records, strict=True) if sees(record)}
    return [r for r in runs if r.thread_id in shown]
