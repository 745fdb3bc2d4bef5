"""Forks at any revision of a thread, and a thread set back to one of its own revisions.

A revision is *on a thread's lineage* when it is an ancestor of the head (or the head), or when a
compaction replaced it: a compaction re-adds the messages it keeps as new revisions after its
summary, so a revision id read before the compaction (a run's ``history_revision_id``, an HTTP
checkpoint id) names the same point of the same conversation, and stays a valid fork point. Anything
else (another thread's revision, an unknown id) raises ``RevisionNotFound``: a fork never reaches a
conversation its thread did not have.

Calls left without a result at the fork point (a pending approval, a step cut short) get error
results in the fork, so its history pairs every call as any finished run's does.
"""

from __future__ import annotations

from repertory.core.history import MessageHistory
from repertory.core.messages import ModelMessage
from repertory.core.store import SessionStore, TreeStore
from repertory.errors import RevisionNotFound, StoreError
from repertory.runtime._control import pair_unanswered

__all__ = ["FORK_REASON", "REWIND_REASON", "fork_point", "pair_open_calls", "rewind"]

FORK_REASON = "not run in this fork: the fork was made before this call had a result"
"""The error result a fork gives the calls it leaves open where it starts."""

REWIND_REASON = "not run on this branch: the thread went back to an earlier checkpoint before this call had a result"
"""The error result the calls left open at a checkpoint get when a thread goes back to it."""


def pair_open_calls(history: MessageHistory, reason: str) -> ModelMessage | None:
    """Append error results (``reason``) for the head's calls that have none; returns that message, if any."""
    return pair_unanswered(history, reason)


async def fork_point(
    store: SessionStore, head: str | None, at_revision: str | None, *, history: MessageHistory | None = None
) -> MessageHistory:
    """The history a fork at ``at_revision`` (default: the head) of a thread headed at ``head`` starts from.

    A new view headed at that revision, with nothing appended: appending to it never changes the
    thread's own history. ``history`` is the thread's history if the caller holds it already (it
    must reach ``head``). Raises ``RevisionNotFound`` for a revision not on the thread's lineage.
    """
    target = at_revision or head
    if target is None:
        return MessageHistory()
    if head is None:
        raise RevisionNotFound(f"revision {target!r} is not on the lineage of a thread with no history")
    if history is None or history.revision_id != head:
        history = await store.load_history(head)
        if history is None:
            raise StoreError(f"the thread's head {head!r} is not in the store")
    if history.reaches(target):
        return history.branch(target)
    other = await store.load_history(target)
    if other is None:
        raise RevisionNotFound(f"no revision {target!r}")
    said = {rev.entry_id for rev in history.lineage()}
    for rev in other.walk_back():
        if history.revision(rev.id) is not None and history.reaches(rev.id):
            return other  # a revision a compaction replaced: the same conversation, up to that point
        if rev.entry_id not in said:
            break
    raise RevisionNotFound(f"revision {target!r} is not on this thread's lineage")


async def rewind(store: TreeStore, thread_id: str, to: str | None) -> MessageHistory:
    """Set a thread's head back to revision ``to`` of its lineage (``None``: before its first message).

    Nothing is deleted: the revisions after it stay in the store (reachable from the runs and forks
    that point at them) and the next commit on the thread starts a new branch from ``to``. Calls
    left open there get error results (``REWIND_REASON``), written with the head move in one
    compare-and-set; a thread that moved meanwhile raises ``CommitConflict`` and nothing changes.
    Returns the thread's history at its new head.
    """
    thread = await store.load_thread(thread_id)
    if thread is None:
        raise StoreError(f"no thread {thread_id!r}")
    head = thread.history_revision_id
    if to is None:
        start = MessageHistory()
    else:
        start = await fork_point(store, head, to)
        pair_open_calls(start, REWIND_REASON)
    if start.revision_id != head:
        await store.move_head(thread_id, history=start, base_revision_id=head)
    return start
