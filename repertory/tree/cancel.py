"""Cancelling a session and every descendant so that nothing of the subtree runs afterwards.

One walk for every face (``SessionHandle.cancel(tree=True)``, the CLI, HTTP, the web UI) and for a
budget with ``on_exceed="cancel_tree"`` (``TreeServices.cancel_tree``): parent first, then the
store read again until it holds no open turn of the subtree.
"""

from __future__ import annotations

from typing import Protocol

from repertory.core.store import TreeStore
from repertory.core.tree import TurnStatus

__all__ = ["OPEN_TURNS", "SessionCanceller", "cancel_subtree", "subtree"]

OPEN_TURNS: tuple[TurnStatus, ...] = ("queued", "running", "suspended")
"""The statuses of a turn that still has something to do (or wait for)."""


class SessionCanceller(Protocol):
    """What cancels one session's turns (every ``SessionBackend`` does; so does a Ray host's ``HostTree``)."""

    async def cancel(self, session_id: str) -> None:
        """Cancel the session's running turn, its queued ones and its suspended run; return once its drive ended."""
        ...


async def subtree(store: TreeStore, session_id: str) -> list[str]:
    """``session_id`` and its descendants, breadth-first."""
    order, frontier = [session_id], [session_id]
    while frontier:
        level: list[str] = []
        for parent in frontier:
            level.extend(r.session_id for r in await store.list_children(parent))
        order.extend(level)
        frontier = level
    return order


async def cancel_subtree(store: TreeStore, sessions: SessionCanceller, session_id: str) -> None:
    """Cancel the subtree parent first, then again until the store holds no open turn of it.

    Parent first (breadth-first): a parent's cancelled turn cancels the children its delegating
    calls wait for through the delegation's own path, so no parent ever reads a child's
    cancellation as a tool error and asks its model again (which cancelling a leaf first would
    allow). A delegating call caught between spawning its child and queueing the child's turn, or
    a child spawned while the walk ran, may leave an open turn the first pass did not see: the
    store is read again and each session holding an open turn not yet cancelled is cancelled,
    until a pass finds none. Every ``cancel`` waits until the drive it stops has ended, so nothing
    the subtree started is still running when this returns.
    """
    for member in await subtree(store, session_id):
        await sessions.cancel(member)
    tried: set[str] = set()
    while True:
        holding: dict[str, None] = {}
        for member in await subtree(store, session_id):
            for turn in await store.list_turns(member, OPEN_TURNS):
                if turn.submission_id not in tried:
                    tried.add(turn.submission_id)
                    holding[member] = None
        if not holding:
            return
        for member in holding:
            await sessions.cancel(member)
