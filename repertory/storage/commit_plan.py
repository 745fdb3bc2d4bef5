"""What every backend's ``commit_session`` decides before it touches the database.

Pointer agreement and the history delta are backend-agnostic, so they live here once; a backend
only adds the parts that need its transaction (the compare-and-set on the thread head and the
terminal-run guard) and the writes.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from repertory.core.history import HistoryEntry, HistoryIntegrityError, HistoryRevision, MessageHistory
from repertory.core.state import RunState, ThreadState
from repertory.core.tree import SessionEvent
from repertory.errors import CommitConflict, StoreError

__all__ = [
    "CommitDelta",
    "check_event_sessions",
    "check_head_move",
    "check_stored_state",
    "entry_holders",
    "plan_commit",
    "plan_commit_async",
    "plan_head_move",
    "plan_head_move_async",
]


@dataclass(frozen=True, slots=True)
class CommitDelta:
    """The revisions (root-most first) and entries a commit must write (one per revision); may be empty.

    ``grows`` is true when the revisions grow from the commit's base, which is how a step adds
    what it said: each names an entry minted with it, so a store that keeps a message with the
    revision that wrote it (SQLite) need not ask whether the entry is stored already. When it is
    false (a thread's first commit, a fork's, a compaction re-adding the messages it keeps, a head
    move), ``entry_holders`` says which entries other revisions already name.
    """

    revisions: list[HistoryRevision]
    entries: list[HistoryEntry]
    grows: bool = False


def _check_pointers(run: RunState, thread: ThreadState, history: MessageHistory) -> None:
    if run.thread_id != thread.thread_id:
        raise CommitConflict(
            f"run {run.run_id!r} belongs to thread {run.thread_id!r}, not {thread.thread_id!r}",
            run_id=run.run_id,
            thread_id=thread.thread_id,
        )
    if not (run.history_revision_id == thread.history_revision_id == history.revision_id):
        raise CommitConflict(
            "revision pointers disagree: "
            f"run={run.history_revision_id!r} thread={thread.history_revision_id!r} "
            f"history={history.revision_id!r}",
            run_id=run.run_id,
            thread_id=thread.thread_id,
        )


def _walk(
    run: RunState, thread: ThreadState, history: MessageHistory, base_revision_id: str | None
) -> tuple[list[HistoryRevision], bool]:
    """Revisions from the head back to the base (newest first), and whether the walk met the base."""
    _check_pointers(run, thread, history)
    try:
        walked = history.walk_back(stop_at=base_revision_id)
    except HistoryIntegrityError as exc:
        raise CommitConflict(f"history is incomplete: {exc}", run_id=run.run_id) from exc
    met_base = base_revision_id is not None and (
        (bool(walked) and walked[-1].parent_id == base_revision_id) or history.revision_id == base_revision_id
    )
    return walked, met_base


def _finish(history: MessageHistory, walked: list[HistoryRevision], grows: bool = False) -> CommitDelta:
    walked.reverse()
    entries: list[HistoryEntry] = []
    for i, rev in enumerate(walked):
        entry = history.entry(rev.entry_id)
        if entry is None:
            raise CommitConflict(f"history is incomplete: no entry {rev.entry_id!r} for revision {rev.id!r}")
        parent = walked[i - 1] if i else (history.revision(rev.parent_id) if rev.parent_id else None)
        expected = 1 if rev.parent_id is None else (parent.depth + 1 if parent is not None else rev.depth)
        if rev.depth != expected:
            raise CommitConflict(f"revision {rev.id!r} has depth {rev.depth}, expected {expected}")
        entries.append(entry)
    return CommitDelta(revisions=walked, entries=entries, grows=grows and bool(walked))


def entry_holders(history: MessageHistory, delta: CommitDelta) -> dict[str, str]:
    """Entry id -> a revision outside ``delta`` (in ``history``) naming it, for the entries of ``delta`` that have one.

    Such an entry is not new: the store may hold its message already, with that revision. One
    pass over the history's revisions, so it is asked only of commits that do not grow from
    their base (``CommitDelta.grows``), which are rare; a step never pays it.
    """
    wanted = {entry.id for entry in delta.entries}
    if not wanted:
        return {}
    own = {rev.id for rev in delta.revisions}
    holders: dict[str, str] = {}
    for rev in history.revisions:
        if rev.entry_id in wanted and rev.id not in own:
            holders.setdefault(rev.entry_id, rev.id)
    return holders


def plan_commit(
    run: RunState,
    thread: ThreadState,
    history: MessageHistory,
    base_revision_id: str | None,
    holds: Callable[[str], bool],
) -> CommitDelta:
    """Check the pointers and find the revisions and entries the store does not hold yet.

    The walk goes from the new head back to ``base_revision_id``. When it meets the base, every
    revision walked is new and ``holds`` is never called: a step costs its own revisions. When it
    does not (a fork's first commit, or a head that is not a descendant of the base), it stops at
    the first revision the store already ``holds``, so a fork's shared prefix is never rewritten.
    """
    walked, met_base = _walk(run, thread, history, base_revision_id)
    if not met_base:
        for i, rev in enumerate(walked):
            if holds(rev.id):
                walked = walked[:i]
                break
    return _finish(history, walked, met_base)


async def plan_commit_async(
    run: RunState,
    thread: ThreadState,
    history: MessageHistory,
    base_revision_id: str | None,
    holds: Callable[[str], Awaitable[bool]],
) -> CommitDelta:
    """``plan_commit`` for a store whose existence check is a network round trip."""
    walked, met_base = _walk(run, thread, history, base_revision_id)
    if not met_base:
        for i, rev in enumerate(walked):
            if await holds(rev.id):
                walked = walked[:i]
                break
    return _finish(history, walked, met_base)


def _walk_head(history: MessageHistory, thread_id: str) -> list[HistoryRevision]:
    try:
        return history.walk_back()
    except HistoryIntegrityError as exc:
        raise CommitConflict(f"history is incomplete: {exc}", thread_id=thread_id) from exc


def plan_head_move(history: MessageHistory, thread_id: str, holds: Callable[[str], bool]) -> CommitDelta:
    """What ``move_head`` must write: the revisions from the new head back to the first one the store holds.

    A head move is never a descendant step of the old head (that is a run's commit), so there is
    no base to meet: the walk stops at the first revision held, which is where the new lineage
    joins what is stored (a fork's shared prefix, the revision a thread is set back to).
    """
    walked = _walk_head(history, thread_id)
    for i, rev in enumerate(walked):
        if holds(rev.id):
            walked = walked[:i]
            break
    return _finish(history, walked)


async def plan_head_move_async(
    history: MessageHistory, thread_id: str, holds: Callable[[str], Awaitable[bool]]
) -> CommitDelta:
    """``plan_head_move`` for a store whose existence check is a network round trip."""
    walked = _walk_head(history, thread_id)
    for i, rev in enumerate(walked):
        if await holds(rev.id):
            walked = walked[:i]
            break
    return _finish(history, walked)


def check_head_move(thread_id: str, base_revision_id: str | None, thread_exists: bool, stored_head: str | None) -> None:
    """The in-transaction guard of ``move_head``: the thread exists and its head is still ``base_revision_id``."""
    if not thread_exists:
        raise CommitConflict(f"thread {thread_id!r} does not exist", thread_id=thread_id)
    if stored_head != base_revision_id:
        raise CommitConflict(
            f"thread {thread_id!r} head moved: stored {stored_head!r}, expected {base_revision_id!r}",
            thread_id=thread_id,
        )


def check_stored_state(
    run: RunState,
    thread: ThreadState,
    base_revision_id: str | None,
    stored_head: str | None,
    thread_exists: bool,
    stored_run_status: str | None,
    redeem_token: str | None = None,
    stored_token: str | None = None,
) -> None:
    """The in-transaction guards: CAS on the thread head, no write over a finished run, token redemption.

    ``redeem_token`` makes the commit a redemption: it lands only if that token is still the
    stored run's live token, so of several racing redemptions of one token exactly one commits.
    """
    if base_revision_id is None:
        if thread_exists and stored_head is not None:
            raise CommitConflict(
                f"thread {thread.thread_id!r} already has head {stored_head!r}; "
                "a commit with base_revision_id=None only creates a thread",
                thread_id=thread.thread_id,
            )
    elif stored_head != base_revision_id:
        raise CommitConflict(
            f"thread {thread.thread_id!r} head moved: stored {stored_head!r}, expected {base_revision_id!r}",
            thread_id=thread.thread_id,
        )
    if stored_run_status in ("done", "cancelled"):
        raise CommitConflict(
            f"run {run.run_id!r} is already {stored_run_status}; a finished run cannot change",
            run_id=run.run_id,
        )
    if redeem_token is not None and (
        stored_token is None or not secrets.compare_digest(stored_token.encode(), redeem_token.encode())
    ):
        raise CommitConflict(
            f"run {run.run_id!r}: the resume token is no longer live", run_id=run.run_id, token_redeemed=True
        )


def check_event_sessions(events: Sequence[SessionEvent], thread_id: str) -> None:
    """A checkpoint carries only its own session's events (a session's id is its thread's id)."""
    for event in events:
        if event.session_id != thread_id:
            raise StoreError(f"a commit on thread {thread_id!r} carries an event of session {event.session_id!r}")
