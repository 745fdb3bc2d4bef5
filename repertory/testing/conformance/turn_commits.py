"""The ``TreeStore`` rules of a turn's bookkeeping riding other writes (issue 21: what a turn costs).

``commit_session(turn=..., session=...)`` rewrites the turn's and the session's mutable fields in
the checkpoint's own transaction, ``add_turn(turn, events=...)`` appends events with the turn, and
``accept_turn`` does what ``add_turn`` does and hands back the session's thread as that write saw it.
Each is all or nothing: a refused commit or a refused event leaves the turn, the session and the
log exactly as they were. ``TreeConformance`` includes these tests (subclass that, not this).
"""

from __future__ import annotations

from typing import Any

import pytest

from repertory.core.messages import ModelMessage
from repertory.core.state import ErrorInfo
from repertory.core.store import TreeStore
from repertory.errors import CommitConflict, StoreError
from repertory.testing.conformance._looks import Conformance
from repertory.testing.conformance.records import history_of, pointers
from repertory.testing.conformance.tree_records import event, events, session_record, turn_record

__all__ = ["TurnCommitConformance"]


async def _seen(store: TreeStore, session_id: str) -> dict[str, Any]:
    """What a reader sees of one session: its row, thread, turns, events and runs."""
    session = await store.load_session(session_id)
    thread = await store.load_thread(session_id)
    return {
        "session": None if session is None else session.model_dump(mode="json"),
        "thread": None if thread is None else thread.model_dump(mode="json"),
        "turns": [t.model_dump(mode="json") for t in await store.list_turns(session_id)],
        "events": [e.model_dump(mode="json") for e in await store.load_events(session_id)],
        "runs": [r.model_dump(mode="json") for r in await store.list_runs(session_id)],
    }


class TurnCommitConformance(Conformance):
    """Turn and session rows carried by ``commit_session``, events carried by ``add_turn``."""

    async def test_a_commit_carries_the_turn_and_the_session(self, store: TreeStore) -> None:
        await store.create_session(session_record("s", title="kept"))
        queued = await store.add_turn(turn_record("s", "t1", "first", run_id="r"))
        history = history_of("first")
        run, thread = pointers(history, thread_id="s", run_id="r")
        started = queued.model_copy(update={"status": "running", "updated_at": 5_000})
        await store.commit_session(run=run, thread=thread, history=history, turn=started, events=events("s", 1))
        assert await store.load_turn("t1") == started

        base = history.revision_id
        history.append(ModelMessage.assistant("done"))
        run, thread = pointers(history, thread_id="s", run_id="r", step_index=1, status="done")
        error = ErrorInfo(message="m", type="T", stack="s")
        # A stale copy may say anything about the turn's place: only status, error and times change.
        ended = started.model_copy(update={"status": "error", "error": error, "updated_at": 6_000, "seq": 9})
        stale = session_record("s", title="renamed", updated_at=6_000, agent="someone-else")
        await store.commit_session(
            run=run,
            thread=thread,
            history=history,
            base_revision_id=base,
            events=[event("s", 2, "turn.completed")],
            turn=ended,
            session=stale,
        )
        stored = await store.load_turn("t1")
        assert stored is not None and stored.seq == queued.seq == 1 and stored.message == queued.message
        assert (stored.status, stored.error, stored.updated_at) == ("error", error, 6_000)
        session = await store.load_session("s")
        assert session is not None and (session.title, session.updated_at) == ("renamed", 6_000)
        assert session.agent == "assistant"
        assert [e.seq for e in await store.load_events("s")] == [1, 2]
        assert await store.load_run("r") == run

    @pytest.mark.parametrize("refusal", ["moved-head", "event-gap", "unknown-turn", "unknown-session"])
    async def test_a_refused_commit_writes_neither_the_turn_nor_the_session(
        self, store: TreeStore, refusal: str
    ) -> None:
        await store.create_session(session_record("s"))
        queued = await store.add_turn(turn_record("s", "t1", run_id="r"))
        history = history_of("first")
        run, thread = pointers(history, thread_id="s", run_id="r")
        await store.commit_session(run=run, thread=thread, history=history, events=events("s", 1))
        before = await _seen(store, "s")

        base = history.revision_id
        history.append(ModelMessage.assistant("lost"))
        run, thread = pointers(history, thread_id="s", run_id="r", step_index=1, status="done")
        turn = queued.model_copy(update={"status": "done", "updated_at": 7_000})
        session = session_record("s", updated_at=7_000)
        carried = events("s", 2)
        error: type[Exception] = CommitConflict
        if refusal == "moved-head":
            base = "not-the-head"
        elif refusal == "event-gap":
            carried = events("s", 3)
        elif refusal == "unknown-turn":
            turn, error = turn_record("s", "nobody", run_id="r"), StoreError
        else:
            session, error = session_record("nobody"), StoreError
        with pytest.raises(error):
            await store.commit_session(
                run=run,
                thread=thread,
                history=history,
                base_revision_id=base,
                events=carried,
                turn=turn,
                session=session,
            )
        assert await _seen(store, "s") == before
        assert await store.load_session("nobody") is None and await store.load_turn("nobody") is None

    async def test_add_turn_appends_its_events_with_it(self, store: TreeStore) -> None:
        await store.create_session(session_record("s"))
        await store.append_events(events("s", 1))
        stored = await store.add_turn(turn_record("s", "t1", status="running"), events=events("s", 2, 3))
        assert stored.seq == 1 and (await store.load_turn("t1")) == stored
        assert [e.seq for e in await store.load_events("s")] == [1, 2, 3]
        # Without events it is a plain add_turn: the log stays as it is.
        assert (await store.add_turn(turn_record("s", "t2"))).seq == 2
        assert await store.last_event_seq("s") == 3

    @pytest.mark.parametrize("adder", ["add_turn", "accept_turn"])
    @pytest.mark.parametrize("refusal", ["event-gap", "repeated-seq", "duplicate-turn"])
    async def test_a_refused_add_turn_writes_neither_the_turn_nor_its_events(
        self, store: TreeStore, refusal: str, adder: str
    ) -> None:
        await store.create_session(session_record("s"))
        await store.add_turn(turn_record("s", "t1"), events=events("s", 1))
        before = await _seen(store, "s")
        submission, carried = "t2", events("s", 2)
        if refusal == "event-gap":
            carried = events("s", 3)
        elif refusal == "repeated-seq":
            carried = events("s", 1)
        else:
            submission = "t1"
        with pytest.raises(CommitConflict):
            await getattr(store, adder)(turn_record("s", submission, "again"), events=carried)
        assert await _seen(store, "s") == before

    async def test_accept_turn_returns_the_thread_its_write_saw(self, store: TreeStore) -> None:
        await store.create_session(session_record("s", created_at=2_000))
        first, thread = await store.accept_turn(turn_record("s", "t1", status="running"), events=events("s", 1))
        assert first.seq == 1 and await store.load_turn("t1") == first
        assert thread == await store.load_thread("s")
        assert thread is not None and (thread.history_revision_id, thread.created_at) == (None, 2_000)
        assert [e.seq for e in await store.load_events("s")] == [1]

        # The head moved (a run's commit, or a head set back through the store): the next accept says so.
        history = history_of("first")
        run, moved = pointers(history, thread_id="s", run_id="r")
        await store.commit_session(run=run, thread=moved, history=history)
        second, thread = await store.accept_turn(turn_record("s", "t2"))
        assert second.seq == 2 and await store.load_turn("t2") == second
        assert thread == await store.load_thread("s")
        assert thread is not None and thread.history_revision_id == history.revision_id

    async def test_accept_turn_on_a_session_without_a_thread_returns_none(self, store: TreeStore) -> None:
        accepted = await store.accept_turn(turn_record("nobody", "t1"))
        assert accepted.thread is None and accepted.turn.seq == 1
        assert await store.load_turn("t1") == accepted.turn

    async def test_accept_turn_keeps_any_record_exactly(self, store: TreeStore) -> None:
        """Ids with quotes, a message that spells a seq field, a NUL: the stored turn is the one accepted."""
        await store.create_session(session_record('s "seq":4'))
        odd = turn_record('s "seq":4', 't1 "seq":5,', 'say "seq":6, then \x00 and "seq":-1', seq=7)
        stored, _ = await store.accept_turn(odd)
        assert stored.seq == 1 and stored == odd.model_copy(update={"seq": 1})
        assert await store.load_turn('t1 "seq":5,') == stored
        assert [t.seq for t in await store.list_turns('s "seq":4')] == [1]
