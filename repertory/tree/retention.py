"""Retention: find session trees nobody has touched for a while, and delete them (``repertory retention``).

A tree is every session sharing a ``root_id``: the root, what it spawned and forked, and theirs.
A tree is idle when none of its sessions has a turn queued or running and the last write to any
of them (a commit on its thread, a finished turn) is older than the cut-off. A run waiting for an
approval that long is idle too: it is deleted with its tree. A tree whose root was deleted earlier
(its surviving forks) is still a tree, found by the same ``root_id``.

Finding trees reads every session row and thread head (O(sessions)): retention is a batch job,
not a request path.
"""

from __future__ import annotations

from dataclasses import dataclass

from repertory.core.ids import now_ms
from repertory.core.store import DeletedRows
from repertory.tree.runtime import Runtime

__all__ = ["MAX_IDLE_DAYS", "IdleTree", "delete_idle_trees", "idle_trees"]

DAY_MS = 86_400_000


@dataclass(frozen=True)
class IdleTree:
    """One idle tree: its root id, its sessions (oldest first), its last write (epoch ms), whether its root exists."""

    root_id: str
    session_ids: list[str]
    last_active: int
    root_exists: bool


MAX_IDLE_DAYS = 100 * 366
"""The longest idle time asked about: a century, so every finite answer fits the store's timestamps."""


async def idle_trees(runtime: Runtime, *, idle_days: float, now: int | None = None) -> list[IdleTree]:
    """Trees idle for at least ``idle_days`` days, least recently active first."""
    if not 0 <= idle_days <= MAX_IDLE_DAYS:  # NaN fails both comparisons
        raise ValueError(f"idle_days must be between 0 and {MAX_IDLE_DAYS}, not {idle_days}")
    store = runtime.store
    cutoff = (now if now is not None else now_ms()) - int(idle_days * DAY_MS)
    busy = {t.session_id for t in await store.list_open_turns()}
    trees: dict[str, list[str]] = {}
    active: dict[str, int] = {}
    for record in await store.list_sessions():
        thread = await store.load_thread(record.session_id)
        last = max(record.updated_at, thread.updated_at if thread is not None else 0)
        trees.setdefault(record.root_id, []).append(record.session_id)
        active[record.root_id] = max(active.get(record.root_id, 0), last)
        if record.session_id in busy:
            active[record.root_id] = max(active[record.root_id], cutoff + 1)  # never idle while it works
    found = [
        IdleTree(root_id=root, session_ids=members, last_active=active[root], root_exists=root in members)
        for root, members in trees.items()
        if active[root] <= cutoff
    ]
    found.sort(key=lambda t: t.last_active)
    return found


async def delete_idle_trees(runtime: Runtime, trees: list[IdleTree]) -> DeletedRows:
    """Delete each tree whole, forks included (``Runtime.delete_session(..., forks=True)`` from its tops)."""
    total = DeletedRows()
    for tree in trees:
        members = set(tree.session_ids)
        for session_id in tree.session_ids:
            record = await runtime.store.load_session(session_id)
            if record is None:
                continue  # already gone with a top above it
            parent = record.lineage.parent_id
            if parent is None or parent not in members or await runtime.store.load_session(parent) is None:
                total = total + await runtime.delete_session(session_id, forks=True)
    return total
