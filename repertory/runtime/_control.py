"""Run control outside the step loop: cancelling a run and superseding a thread's open runs.

Both work from the store's committed state, not from any in-memory copy, so they are correct
whether the run is driven in this process, elsewhere, or nowhere (crashed).
"""

from __future__ import annotations

from collections.abc import Sequence

from repertory.core.history import MessageHistory
from repertory.core.ids import now_ms
from repertory.core.memory import Memory
from repertory.core.messages import ModelMessage
from repertory.core.state import ErrorInfo, RunState, ThreadState
from repertory.core.store import SessionStore
from repertory.core.tree import SessionEvent, SessionRecord, TurnRecord
from repertory.errors import CommitConflict
from repertory.runtime._calls import error_result, tool_message, unanswered_calls

__all__ = ["commit_cancelled", "commit_failed", "supersede_open_runs", "pair_unanswered"]

_ATTEMPTS = 5


def _since_last_assistant(history: MessageHistory) -> list[ModelMessage]:
    """The head's messages back to the latest assistant message, oldest first: all ``unanswered_calls`` reads.

    Walking back only that far keeps superseding and forking at the cost of the last step, not of
    the whole conversation.
    """
    out: list[ModelMessage] = []
    current = history.revision_id
    while current is not None:
        rev = history.revision(current)
        entry = None if rev is None else history.entry(rev.entry_id)
        if rev is None or entry is None:
            return history.messages  # a partial view: let the full read say what is missing
        out.append(entry.message)
        if entry.message.role == "assistant":
            break
        current = rev.parent_id
    out.reverse()
    return out


def pair_unanswered(history: MessageHistory, reason: str) -> ModelMessage | None:
    """Give every unanswered call at the head an error result; returns the message appended, if any."""
    calls = unanswered_calls(_since_last_assistant(history))
    if not calls:
        return None
    message = tool_message([error_result(c, reason) for c in calls])
    history.append(message)
    return message


async def commit_cancelled(
    store: SessionStore, run_id: str, reason: str, memory: Memory | None = None
) -> RunState | None:
    """Commit the run as ``cancelled``: its token dies and its pending calls get error results.

    A finished run is left alone (and returned as it is). Retries when it races with a commit.
    """
    for _ in range(_ATTEMPTS):
        run: RunState | None = await store.load_run(run_id)
        if run is None or run.is_terminal:
            return run
        thread: ThreadState | None = await store.load_thread(run.thread_id)
        head = None if thread is None else thread.history_revision_id
        now = now_ms()
        run.to_cancelled(reason, now)
        run.updated_at = now
        if thread is None or run.history_revision_id != head:
            # The thread has moved past this run (or never existed): the run no longer owns the
            # head, so only its own row changes.
            await store.save(run)
            return run
        history = MessageHistory() if head is None else await store.load_history(head)
        assert history is not None
        answered = pair_unanswered(history, f"cancelled: {reason}")
        run.history_revision_id = history.revision_id
        new_thread = thread.model_copy(update={"history_revision_id": history.revision_id, "updated_at": now})
        try:
            await store.commit_session(run=run, thread=new_thread, history=history, base_revision_id=head)
        except CommitConflict:
            continue
        if memory is not None and answered is not None:
            await memory.append(thread_id=run.thread_id, messages=[answered])
        return run
    raise CommitConflict(f"could not cancel run {run_id!r}: it kept changing", run_id=run_id)


async def commit_failed(
    store: SessionStore,
    run_id: str,
    error: ErrorInfo,
    *,
    turn: TurnRecord,
    session: SessionRecord,
    events: Sequence[SessionEvent],
) -> RunState | None:
    """Commit a stored ``running`` run ``error``, with its turn's end and ``events``, in one transaction.

    For a turn whose drive failed before it began (a re-driven run whose tool source cannot start
    in this process): no drive is there to commit the error, and the turn's end written alone
    would leave its run ``running`` for good (found by the chaos soak, issue 26). Returns the run
    committed, or ``None`` with nothing written when the run is not ``running`` or no longer owns
    its thread's head (the caller then ends the turn as the run says). A store failure raises: the
    caller drives the turn again.
    """
    run: RunState | None = await store.load_run(run_id)
    if run is None or run.status != "running":
        return None
    thread: ThreadState | None = await store.load_thread(run.thread_id)
    head = None if thread is None else thread.history_revision_id
    if thread is None or head != run.history_revision_id:
        return None
    history = MessageHistory() if head is None else await store.load_history(head)
    if history is None:
        return None
    now = now_ms()
    run.to_error(error)
    run.updated_at = now
    await store.commit_session(
        run=run,
        thread=thread.model_copy(update={"updated_at": now}),
        history=history,
        base_revision_id=head,
        events=events,
        turn=turn,
        session=session,
    )
    return run


async def supersede_open_runs(
    store: SessionStore, thread_id: str, keep: str | None = None, memory: Memory | None = None
) -> list[RunState]:
    """Cancel every suspended or running run of a thread (a new run is about to start on it)."""
    cancelled: list[RunState] = []
    for run in await store.list_runs(thread_id, statuses=("suspended", "running")):
        if run.run_id != keep:
            done = await commit_cancelled(store, run.run_id, "superseded by a new run", memory)
            if done is not None:
                cancelled.append(done)
    return cancelled
