"""``StoreConformance``: the ``SessionStore`` contract (docs/guides/stores.md) as a test class to subclass.

Why one module past 600 lines: it is one contract (the ``SessionStore`` protocol), and a store
author subclasses one class to test all of it; split, a store's test class would list several
bases to get the whole of ``SessionStore``.

Round trips of every record field, listing order, copies on read, the history graph stored once
per message, atomic commits guarded by compare-and-set on the thread head, resume tokens redeemed
once, awkward text and ids, and the closed-store lifecycle. A store passes when every test here
passes against it; the white-box checks (row counts, failure injection, reopen) need the fixture's
``StoreProbe`` and are left out or skipped without one.
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from repertory.core.history import MessageHistory
from repertory.core.messages import ModelMessage, Origin, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from repertory.core.state import RunState, SuspendReason, ThreadState
from repertory.core.store import SessionStore
from repertory.errors import CommitConflict, StoreError
from repertory.testing.conformance._looks import Conformance, Looks
from repertory.testing.conformance.probe import INJECTED_FAILURE
from repertory.testing.conformance.records import commit, full_runs, history_of, pointers, rich_messages

__all__ = ["StoreConformance"]


async def _snapshot(store: SessionStore, looks: Looks, *, run_id: str = "r", thread_id: str = "t") -> dict[str, Any]:
    """Everything a failed commit must leave exactly as it was."""
    run = await store.load_run(run_id)
    thread = await store.load_thread(thread_id)
    return {
        "run": None if run is None else run.model_dump(),
        "thread": None if thread is None else thread.model_dump(),
        "runs": [r.model_dump() for r in await store.list_runs()],
        "rows": await looks.history_rows(),
    }


def _new_entry_ids(history: MessageHistory, since: str | None) -> list[str]:
    return [rev.entry_id for rev in history.walk_back(stop_at=since)]


def _disagreeing(kind: str) -> tuple[RunState, ThreadState, MessageHistory]:
    history = history_of("a", "b")
    run, thread = pointers(history)
    other = history.lineage()[0].id
    if kind == "run":
        run.history_revision_id = other
    elif kind == "thread":
        thread.history_revision_id = other
    elif kind == "history":
        history.append(ModelMessage.user("c"))
    elif kind == "thread-id":
        run.thread_id = "another-thread"
    elif kind == "incomplete":
        history = MessageHistory(revision_id=history.revision_id, entries=history.entries)
    return run, thread, history


async def _redeem(
    store: SessionStore, history: MessageHistory, token: str, base: str | None, run_id: str = "r"
) -> None:
    run, thread = pointers(history, status="running", run_id=run_id, thread_id=f"thread-of-{run_id}")
    await store.commit_session(run=run, thread=thread, history=history, base_revision_id=base, redeem_token=token)


def _every_field() -> list[ModelMessage]:
    """Every part kind with every optional field set, a boundary, a model name, and values whose
    Python form is not their JSON form (a tuple): a load returns what the store holds, the JSON."""
    return [
        *rich_messages(),
        ModelMessage(
            role="assistant",
            parts=[
                ReasoningPart(text="signed", signature="sig-1"),
                ReasoningPart(text="", signature="encrypted", redacted=True),
                ToolCallPart(tool_call_id="bad", tool_name="add", invalid_args="{not json"),
                ToolCallPart(tool_call_id="legacy", tool_name="add", args={"__invalid_json__": "old text"}),
                ToolCallPart(tool_call_id="tuple", tool_name="add", args={"pair": (1, 2), "n": None}),
            ],
            origin=Origin(kind="model", id="m"),
            model="provider/model-7",
        ),
        ModelMessage(
            role="tool",
            parts=[
                ToolResultPart(tool_call_id="tuple", tool_name="add", result=[1, {"deep": [True, 2.5]}]),
                ToolResultPart(tool_call_id="bad", tool_name="add", result=None, is_error=True),
            ],
        ),
        ModelMessage(role="user", parts=[TextPart(text="the summary so far")], boundary=True),
        ModelMessage.user("after the boundary"),
    ]


async def _commit_every_field(store: SessionStore) -> tuple[MessageHistory, list[ModelMessage]]:
    said = _every_field()
    expected = [ModelMessage.model_validate_json(m.model_dump_json()) for m in said]
    assert expected[8].tool_calls[2].args == {"pair": [1, 2], "n": None}
    assert expected[8].tool_calls[1].invalid_args == "old text"
    history = MessageHistory()
    history.extend(said)
    await commit(store, history)
    return history, expected


async def _check_every_field(
    store: SessionStore, revision_id: str, history: MessageHistory, expected: list[ModelMessage]
) -> None:
    loaded = await store.load_history(revision_id)
    assert loaded is not None
    assert loaded.revision_id == revision_id
    assert loaded.messages == expected
    assert [m.model_dump(mode="json") for m in loaded.messages] == [m.model_dump(mode="json") for m in expected]
    assert [e.message for e in loaded.entries] == expected
    assert loaded.revisions == history.lineage()[: len(expected)]


# -- awkward data ---------------------------------------------------------------------------------

AWKWARD_TEXTS = [
    "emoji 🧪👩‍👩‍👧‍👦🏳️‍🌈 and CJK 汉字かな",
    "RTL: مرحبا بالعالم / שלום עולם \u202e reversed \u202c",
    "NUL inside\x00the text, and \x01\x1f control chars",
    "quotes ' \" ` and backslashes \\ \\\\ and SQL '; DROP TABLE runs; --",
    "line\nbreaks\r\n\u2028\u2029 and combining e\u0301",
    "",
]

AWKWARD_IDS = ["'; DROP TABLE runs; --", 'id "with" quotes', "back\\slash%_*?", "🧵 thread", "new\nline\ttab"]


# -- lifecycle ------------------------------------------------------------------------------------

CLOSED_CALLS: dict[str, Callable[[SessionStore], Awaitable[object]]] = {
    "load_run": lambda s: s.load_run("r"),
    "list_runs": lambda s: s.list_runs(),
    "list_runs_thread": lambda s: s.list_runs("t"),
    "delete_run": lambda s: s.delete_run("r"),
    "load_thread": lambda s: s.load_thread("t"),
    "load_history": lambda s: s.load_history("x"),
    "save": lambda s: s.save(RunState(run_id="r", thread_id="t")),
    "commit_session": lambda s: commit(s, history_of("late")),
}


class StoreConformance(Conformance):
    """Subclass with a ``store`` fixture (an open, empty ``SessionStore``) and optionally a ``probe``.

    Every test gets a fresh store from the fixture. Some tests close the store themselves, so the
    fixture's own closing must tolerate a closed store (``close()`` twice is part of the contract).
    """

    # -- round trips -------------------------------------------------------------------------------

    async def test_runs_round_trip_every_field_through_save_and_commit(self, store: SessionStore) -> None:
        history = MessageHistory()
        history.extend(rich_messages())
        runs = full_runs("t", history.revision_id)
        await store.save(runs[0])
        await store.save(runs[1])
        thread = ThreadState(thread_id="t", history_revision_id=history.revision_id)
        await store.commit_session(run=runs[2], thread=thread, history=history)
        for run in runs:
            loaded = await store.load_run(run.run_id)
            assert loaded == run
            assert loaded is not run
            assert loaded.model_dump(mode="json") == run.model_dump(mode="json")

    async def test_thread_round_trips_and_keeps_its_creation_time(self, store: SessionStore) -> None:
        history = history_of("a")
        run, _ = pointers(history)
        thread = ThreadState(thread_id="t", history_revision_id=history.revision_id, created_at=111, updated_at=222)
        await store.commit_session(run=run, thread=thread, history=history)
        assert await store.load_thread("t") == thread

        base = history.revision_id
        history.append(ModelMessage.assistant("b"))
        run, _ = pointers(history)
        moved = ThreadState(thread_id="t", history_revision_id=history.revision_id, created_at=999, updated_at=333)
        await store.commit_session(run=run, thread=moved, history=history, base_revision_id=base)
        loaded = await store.load_thread("t")
        assert loaded == ThreadState(
            thread_id="t", history_revision_id=history.revision_id, created_at=111, updated_at=333
        )

    async def test_history_round_trips_every_part_type(self, store: SessionStore) -> None:
        history = MessageHistory()
        history.extend(rich_messages())
        await commit(store, history)
        loaded = await store.load_history(history.revision_id)  # type: ignore[arg-type]
        assert loaded is not None
        assert loaded.revision_id == history.revision_id
        assert loaded.messages == rich_messages()
        assert [m.model_dump(mode="json") for m in loaded.messages] == [
            m.model_dump(mode="json") for m in rich_messages()
        ]
        assert loaded.revisions == history.revisions
        assert loaded.entries == history.entries
        assert [type(p).__name__ for p in loaded.messages[2].parts] == [
            "ReasoningPart",
            "TextPart",
            "ToolCallPart",
            "ToolCallPart",
        ]
        assert loaded.messages[3].tool_results[1].is_error is True

    async def test_every_field_loads_the_same_however_often_it_is_loaded(self, store: SessionStore) -> None:
        # On the first load, on later ones (a store may keep what it decoded), from an inner
        # revision, and after more commits on top: the same messages, as their JSON reads back.
        history, expected = await _commit_every_field(store)
        head, inner = history.revision_id or "", history.lineage()[9].id
        for _ in range(3):
            await _check_every_field(store, head, history, expected)
            await _check_every_field(store, inner, history, expected[:10])
        loaded = await store.load_history(head)
        assert loaded is not None
        assert [m.text for m in loaded.context_messages()] == ["the summary so far", "after the boundary"]
        loaded.append(ModelMessage.user("on top"))
        run, thread = pointers(loaded, run_id="r2", thread_id="t2")
        await store.commit_session(run=run, thread=thread, history=loaded, base_revision_id=None)
        again = await store.load_history(loaded.revision_id or "")
        assert again is not None and again.messages == [*expected, ModelMessage.user("on top")]
        await _check_every_field(store, head, history, expected)

    async def test_every_field_loads_the_same_from_a_reopened_store(self, store: SessionStore, looks: Looks) -> None:
        history, expected = await _commit_every_field(store)
        head, inner = history.revision_id or "", history.lineage()[9].id
        await store.close()
        async with await looks.reopen() as reopened:
            await _check_every_field(reopened, inner, history, expected[:10])
            await _check_every_field(reopened, head, history, expected)
            await _check_every_field(reopened, head, history, expected)

    async def test_history_of_an_inner_revision_is_its_lineage_only(self, store: SessionStore) -> None:
        history = history_of("a", "b", "c", "d")
        await commit(store, history)
        second = history.lineage()[1]
        loaded = await store.load_history(second.id)
        assert loaded is not None
        assert loaded.revision_id == second.id
        assert [m.text for m in loaded.messages] == ["a", "b"]
        assert [r.id for r in loaded.revisions] == [r.id for r in history.lineage()[:2]]
        assert loaded.depth == 2

    async def test_unknown_ids_load_as_none(self, store: SessionStore) -> None:
        await commit(store, history_of("a"))
        assert await store.load_run("nope") is None
        assert await store.load_thread("nope") is None
        assert await store.load_history("nope") is None
        assert await store.list_runs("nope") == []

    async def test_loaded_records_are_copies(self, store: SessionStore, looks: Looks) -> None:
        history = history_of("a", "b")
        run = (full_runs("t", history.revision_id))[0]
        await store.commit_session(
            run=run, thread=ThreadState(thread_id="t", history_revision_id=history.revision_id), history=history
        )
        # Mutating what was written must not reach the store either.
        run.scratch["counter"] = 1000
        run.usage.input_tokens = 1000

        loaded = await store.load_run(run.run_id)
        assert loaded is not None and loaded.scratch["counter"] == 3
        loaded.status = "cancelled"
        loaded.scratch["counter"] = 42
        loaded.scratch["nested"]["list"].append("extra")  # type: ignore[call-overload, index, union-attr]
        loaded.usage.output_tokens = 9999
        listed = await store.list_runs()
        listed[0].step_index = 12345
        listed.clear()
        again = await store.load_run(run.run_id)
        assert again is not None
        assert again.status == "suspended"
        assert again.scratch == {
            "counter": 3,
            "nested": {"list": [1, 2.5, "three", None, False]},
            "text": "ünïcödé",
        }
        assert again.usage.output_tokens == 7
        assert (await store.list_runs())[0].step_index == 4

        thread = await store.load_thread("t")
        assert thread is not None
        thread.history_revision_id = "elsewhere"
        assert (await store.load_thread("t")).history_revision_id == history.revision_id  # type: ignore[union-attr]

        loaded_history = await store.load_history(history.revision_id)  # type: ignore[arg-type]
        assert loaded_history is not None
        loaded_history.append(ModelMessage.user("c"))
        loaded_history.entries.clear()
        fresh = await store.load_history(history.revision_id)  # type: ignore[arg-type]
        assert fresh is not None
        assert [m.text for m in fresh.messages] == ["a", "b"]
        await looks.expect_history_rows((2, 2))

    # -- listing and deleting ----------------------------------------------------------------------

    async def test_list_runs_newest_updated_first_then_latest_write(self, store: SessionStore) -> None:
        async def save(run_id: str, updated_at: int, thread_id: str = "t1") -> None:
            await store.save(RunState(run_id=run_id, thread_id=thread_id, created_at=1, updated_at=updated_at))

        await save("r1", 100)
        await save("r2", 300)
        await save("r3", 200, thread_id="t2")
        await save("r4", 300, thread_id="t2")
        assert [r.run_id for r in await store.list_runs()] == ["r4", "r2", "r3", "r1"]

        await save("r2", 300)  # same timestamp, but now the most recent write
        assert [r.run_id for r in await store.list_runs()] == ["r2", "r4", "r3", "r1"]

        await save("r1", 400)
        assert [r.run_id for r in await store.list_runs()] == ["r1", "r2", "r4", "r3"]
        assert [r.run_id for r in await store.list_runs("t1")] == ["r1", "r2"]
        assert [r.run_id for r in await store.list_runs(thread_id="t2")] == ["r4", "r3"]

        # commit_session writes count as writes too.
        history = history_of("x")
        await commit(store, history, thread_id="t3", run_id="r5", updated_at=300)
        assert [r.run_id for r in await store.list_runs()] == ["r1", "r5", "r2", "r4", "r3"]
        assert [r.run_id for r in await store.list_runs("t3")] == ["r5"]

    async def test_list_runs_filters_by_exact_thread_id(self, store: SessionStore) -> None:
        for thread_id in ("t%", "tx", "t_", "T%", "t"):
            await store.save(RunState(run_id=f"run-{thread_id}", thread_id=thread_id))
        assert [r.run_id for r in await store.list_runs("t%")] == ["run-t%"]
        assert [r.run_id for r in await store.list_runs("t_")] == ["run-t_"]
        assert [r.run_id for r in await store.list_runs("t")] == ["run-t"]

    async def test_list_runs_by_status_and_with_a_limit_keeps_the_order(self, store: SessionStore) -> None:
        statuses = {"a": "done", "b": "running", "c": "suspended", "d": "error", "e": "running"}
        for i, (run_id, status) in enumerate(statuses.items()):
            await store.save(RunState(run_id=run_id, thread_id="t", status=status, updated_at=100 + i))
        await store.save(RunState(run_id="other", thread_id="u", status="running", updated_at=999))
        assert [r.run_id for r in await store.list_runs("t", statuses=("running", "suspended"))] == ["e", "c", "b"]
        assert [r.run_id for r in await store.list_runs("t", limit=2)] == ["e", "d"]
        assert [r.run_id for r in await store.list_runs("t", statuses=("running",), limit=1)] == ["e"]
        assert [r.run_id for r in await store.list_runs(statuses=("running",))] == ["other", "e", "b"]
        assert await store.list_runs("t", statuses=()) == []
        assert await store.list_runs("t", limit=0) == []

    async def test_delete_run_leaves_history_and_threads(self, store: SessionStore, looks: Looks) -> None:
        history = history_of("a", "b")
        await commit(store, history, run_id="r1")
        await store.save(RunState(run_id="r2", thread_id="t", history_revision_id=history.revision_id))
        await store.delete_run("r1")
        assert await store.load_run("r1") is None
        assert [r.run_id for r in await store.list_runs()] == ["r2"]
        assert [r.run_id for r in await store.list_runs("t")] == ["r2"]
        thread = await store.load_thread("t")
        assert thread is not None and thread.history_revision_id == history.revision_id
        loaded = await store.load_history(history.revision_id)  # type: ignore[arg-type]
        assert loaded is not None and [m.text for m in loaded.messages] == ["a", "b"]
        await looks.expect_history_rows((2, 2))
        await store.delete_run("r1")  # deleting twice, or an unknown id, is not an error
        await store.delete_run("never-existed")
        assert [r.run_id for r in await store.list_runs()] == ["r2"]

    async def test_seed_aliases(self, store: SessionStore) -> None:
        run = RunState(run_id="r", thread_id="t")
        await store.save(run)
        assert await store.load("r") == run  # type: ignore[attr-defined]
        assert await store.list("t") == [run]  # type: ignore[attr-defined]
        await store.delete("r")  # type: ignore[attr-defined]
        assert await store.load("r") is None  # type: ignore[attr-defined]

    # -- the history graph in the store ------------------------------------------------------------

    async def test_fork_shares_its_prefix_and_stores_it_once(self, store: SessionStore, looks: Looks) -> None:
        main = history_of("a", "b", "c")
        await commit(store, main, thread_id="main", run_id="r-main")
        await looks.expect_history_rows((3, 3))
        fork_point = main.lineage()[1]

        # Fork from what the store returns, as a session would.
        fork = await store.load_history(fork_point.id)
        assert fork is not None
        fork.append(ModelMessage.user("d"))
        fork.append(ModelMessage.assistant("e"))
        async with looks.history_writes() as writes:
            await commit(store, fork, thread_id="fork", run_id="r-fork", base=None)

        # The fork's first commit wrote its two new revisions and entries only.
        looks.expect_writes(writes, 2, 2)
        await looks.expect_history_rows((5, 5))
        loaded_fork = await store.load_history(fork.revision_id)  # type: ignore[arg-type]
        loaded_main = await store.load_history(main.revision_id)  # type: ignore[arg-type]
        assert loaded_fork is not None and loaded_main is not None
        assert [m.text for m in loaded_fork.messages] == ["a", "b", "d", "e"]
        assert [m.text for m in loaded_main.messages] == ["a", "b", "c"]
        fork_ids = [r.id for r in loaded_fork.lineage()]
        main_ids = [r.id for r in loaded_main.lineage()]
        assert fork_ids[:2] == main_ids[:2]
        assert set(fork_ids[2:]).isdisjoint(main_ids)
        assert [r.entry_id for r in loaded_fork.lineage()][:2] == [r.entry_id for r in loaded_main.lineage()][:2]
        assert [r.depth for r in loaded_fork.lineage()] == [1, 2, 3, 4]

    async def test_fork_of_a_memory_copy_writes_only_new_revisions(self, store: SessionStore, looks: Looks) -> None:
        main = history_of(*[f"m{i}" for i in range(20)])
        await commit(store, main, thread_id="main", run_id="r-main")
        fork = main.branch(main.lineage()[9].id)  # the in-memory view still holds all 20 of main's revisions
        fork.append(ModelMessage.user("f1"))
        async with looks.history_writes() as writes:
            await commit(store, fork, thread_id="fork", run_id="r-fork")
        looks.expect_writes(writes, 1, 1)
        await looks.expect_history_rows((21, 21))
        fork.append(ModelMessage.user("f2"))
        async with looks.history_writes() as writes:
            await commit(store, fork, thread_id="fork", run_id="r-fork", base=fork.lineage()[-2].id)
        looks.expect_writes(writes, 1, 1)
        await looks.expect_history_rows((22, 22))
        loaded = await store.load_history(fork.revision_id)  # type: ignore[arg-type]
        assert loaded is not None
        assert [m.text for m in loaded.messages] == [*(f"m{i}" for i in range(10)), "f1", "f2"]

    async def test_fork_at_an_existing_revision_writes_no_history(self, store: SessionStore, looks: Looks) -> None:
        main = history_of("a", "b", "c")
        await commit(store, main, thread_id="main", run_id="r-main")
        fork = main.branch(main.lineage()[0].id)
        async with looks.history_writes() as writes:
            await commit(store, fork, thread_id="fork", run_id="r-fork")
        looks.expect_writes(writes, 0, 0)
        await looks.expect_history_rows((3, 3))
        thread = await store.load_thread("fork")
        assert thread is not None and thread.history_revision_id == main.lineage()[0].id

    async def test_empty_thread_then_first_message(self, store: SessionStore) -> None:
        history = MessageHistory()
        await commit(store, history)  # a thread with no head yet
        thread = await store.load_thread("t")
        assert thread is not None and thread.history_revision_id is None
        history.append(ModelMessage.user("hello"))
        await commit(store, history, base=None)  # base None: the thread has no head yet
        loaded = await store.load_history(history.revision_id)  # type: ignore[arg-type]
        assert loaded is not None and [m.text for m in loaded.messages] == ["hello"]

    async def test_steps_commit_on_top_of_their_base(self, store: SessionStore, looks: Looks) -> None:
        history = MessageHistory()
        base: str | None = None
        for step in range(5):
            history.append(ModelMessage.user(f"q{step}"))
            history.append(ModelMessage.assistant(f"a{step}"))
            async with looks.history_writes() as writes:
                await commit(store, history, base=base, step_index=step)
            looks.expect_writes(writes, 2, 2)  # the step's own messages, whatever the length
            base = history.revision_id
            await looks.expect_history_rows((2 * (step + 1), 2 * (step + 1)))
        run = await store.load_run("r")
        assert run is not None and run.step_index == 4 and run.history_revision_id == base
        loaded = await store.load_history(base)  # type: ignore[arg-type]
        assert loaded is not None and loaded.messages == history.messages

    # -- atomicity and conflicts -------------------------------------------------------------------

    @pytest.mark.parametrize("existing", [False, True], ids=["new-thread", "existing-thread"])
    async def test_a_commit_that_fails_halfway_leaves_nothing(
        self, store: SessionStore, looks: Looks, existing: bool
    ) -> None:
        history = history_of("a")
        base: str | None = None
        if existing:
            await commit(store, history)
            base = history.revision_id
        history.append(ModelMessage.assistant("b"))
        history.append(ModelMessage.user("c"))
        added = _new_entry_ids(history, base)
        before = await _snapshot(store, looks)
        run, thread = pointers(history, step_index=7)

        async with looks.commit_failure() as expected:
            with pytest.raises(expected, match=INJECTED_FAILURE):
                await store.commit_session(run=run, thread=thread, history=history, base_revision_id=base)

        assert await _snapshot(store, looks) == before
        assert await store.load_history(history.revision_id) is None  # type: ignore[arg-type]
        await looks.expect_held(added, held=False)

        # The store is still usable, and the same commit now goes through.
        await store.commit_session(run=run, thread=thread, history=history, base_revision_id=base)
        assert await store.load_run("r") == run
        loaded = await store.load_history(history.revision_id)  # type: ignore[arg-type]
        assert loaded is not None and [m.text for m in loaded.messages] == ["a", "b", "c"]
        await looks.expect_held(added)
        await looks.expect_history_rows((3, 3))

    @pytest.mark.parametrize("kind", ["run", "thread", "history", "thread-id", "incomplete"])
    async def test_disagreeing_pointers_conflict_and_write_nothing(
        self, store: SessionStore, looks: Looks, kind: str
    ) -> None:
        await commit(store, history_of("x"), thread_id="other", run_id="other")
        before = await _snapshot(store, looks)
        run, thread, history = _disagreeing(kind)
        with pytest.raises(CommitConflict) as info:
            await store.commit_session(run=run, thread=thread, history=history)
        assert await _snapshot(store, looks) == before
        assert await store.load_thread("another-thread") is None
        # A conflict crosses process boundaries intact.
        clone = pickle.loads(pickle.dumps(info.value))
        assert type(clone) is CommitConflict and str(clone) == str(info.value)
        assert clone.details == info.value.details

    async def test_moved_head_conflicts(self, store: SessionStore, looks: Looks) -> None:
        history = history_of("a")
        await commit(store, history)
        base = history.revision_id
        winner = history.branch()
        winner.append(ModelMessage.assistant("from the winner"))
        await commit(store, winner, base=base, step_index=1)
        before = await _snapshot(store, looks)

        loser = history.branch()
        loser.append(ModelMessage.assistant("from a stale writer"))
        with pytest.raises(CommitConflict, match="moved"):
            await commit(store, loser, base=base, step_index=2)
        assert await _snapshot(store, looks) == before
        await looks.expect_held(_new_entry_ids(loser, base), held=False)

        # A base the thread never had, or any base for a thread that does not exist, conflicts too.
        with pytest.raises(CommitConflict):
            await commit(store, loser, base=loser.revision_id, step_index=2)
        with pytest.raises(CommitConflict):
            await commit(store, loser, thread_id="unknown", run_id="r2", base=base)
        assert await _snapshot(store, looks) == before
        assert await store.load_thread("unknown") is None

    async def test_two_writers_with_the_same_base_one_wins(self, store: SessionStore, looks: Looks) -> None:
        history = history_of("a")
        await commit(store, history)
        base = history.revision_id
        writers = [history.branch(), history.branch()]
        for i, writer in enumerate(writers):
            writer.append(ModelMessage.assistant(f"writer {i}"))
            writer.append(ModelMessage.user(f"more from writer {i}"))

        outcomes = await asyncio.gather(
            *(commit(store, w, base=base, step_index=i + 1) for i, w in enumerate(writers)),
            return_exceptions=True,
        )
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        assert len(failures) == 1 and isinstance(failures[0], CommitConflict)
        won = 0 if isinstance(outcomes[1], BaseException) else 1
        winner, loser = writers[won], writers[1 - won]

        thread = await store.load_thread("t")
        assert thread is not None and thread.history_revision_id == winner.revision_id
        run = await store.load_run("r")
        assert run is not None and run.step_index == won + 1
        await looks.expect_held(_new_entry_ids(winner, base))
        await looks.expect_held(_new_entry_ids(loser, base), held=False)
        assert await store.load_history(loser.revision_id) is None  # type: ignore[arg-type]
        await looks.expect_history_rows((3, 3))

    async def test_base_none_on_a_thread_with_a_head_conflicts(self, store: SessionStore, looks: Looks) -> None:
        await commit(store, history_of("a"))
        before = await _snapshot(store, looks)
        newcomer = history_of("b")
        with pytest.raises(CommitConflict):
            await commit(store, newcomer, base=None, run_id="r2")
        assert await _snapshot(store, looks) == before
        assert await store.load_run("r2") is None
        await looks.expect_held([newcomer.entries[0].id], held=False)

    @pytest.mark.parametrize("status", ["done", "cancelled"])
    @pytest.mark.parametrize("how", ["commit", "save"])
    async def test_a_finished_run_cannot_be_committed_over(
        self, store: SessionStore, looks: Looks, status: str, how: str
    ) -> None:
        history = history_of("a")
        if how == "commit":
            await commit(store, history, status=status)
        else:
            await commit(store, history, status="running")
            await store.save(
                RunState(run_id="r", thread_id="t", history_revision_id=history.revision_id, status=status)
            )
        before = await _snapshot(store, looks)
        base = history.revision_id
        history.append(ModelMessage.user("too late"))
        with pytest.raises(CommitConflict, match=status):
            await commit(store, history, base=base, status="running")
        assert await _snapshot(store, looks) == before
        await looks.expect_held([history.entries[-1].id], held=False)

    @pytest.mark.parametrize("status", ["running", "suspended", "error"])
    async def test_an_unfinished_run_can_be_committed_over(self, store: SessionStore, status: str) -> None:
        history = history_of("a")
        await commit(store, history, status=status)
        base = history.revision_id
        history.append(ModelMessage.user("go on"))
        await commit(store, history, base=base, status="done", result="ok")
        run = await store.load_run("r")
        assert run is not None and run.status == "done" and run.result == "ok"

    async def test_a_resume_token_is_redeemed_exactly_once(self, store: SessionStore, looks: Looks) -> None:
        # redeem_token is the engine's extension of commit_session: the redemption and the decision
        # it records land in one transaction, and only while the token is the stored run's live token.
        history = history_of("a")
        live = SuspendReason(token="tok-live", kind="approval")
        await commit(store, history, thread_id="thread-of-r", status="suspended", suspended_on=live)
        base = history.revision_id
        before = await _snapshot(store, looks, thread_id="thread-of-r")
        for wrong in ("tok-wrong", "", "tok-live ", "TOK-LIVE"):
            with pytest.raises(CommitConflict) as info:
                await _redeem(store, history, wrong, base)
            assert info.value.details.get("token_redeemed") is True
        with pytest.raises(CommitConflict):
            await _redeem(store, history_of("x"), "tok-live", None, run_id="unknown")  # a run with no live token
        assert await _snapshot(store, looks, thread_id="thread-of-r") == before
        assert await store.load_run("unknown") is None

        history.append(ModelMessage.user("approved"))
        await _redeem(store, history, "tok-live", base)
        run = await store.load_run("r")
        assert run is not None and run.status == "running" and run.suspended_on is None
        # Used up: the same token again conflicts, even on top of the right head.
        history.append(ModelMessage.user("approved twice"))
        with pytest.raises(CommitConflict):
            await _redeem(store, history, "tok-live", history.lineage()[-2].id)
        await looks.expect_held([history.entries[-1].id], held=False)

    async def test_save_writes_unconditionally(self, store: SessionStore, looks: Looks) -> None:
        history = history_of("a")
        await commit(store, history, status="done")
        await store.save(RunState(run_id="r", thread_id="t", status="running", step_index=3))
        run = await store.load_run("r")
        assert run is not None and run.status == "running" and run.history_revision_id is None
        # A run whose thread and revision the store has never seen.
        orphan = RunState(run_id="orphan", thread_id="no-thread", history_revision_id="no-revision", status="cancelled")
        await store.save(orphan)
        assert await store.load_run("orphan") == orphan
        assert await store.load_thread("no-thread") is None
        thread = await store.load_thread("t")
        assert thread is not None and thread.history_revision_id == history.revision_id
        await looks.expect_history_rows((1, 1))

    async def test_fifty_concurrent_commits_on_distinct_threads_all_land(
        self, store: SessionStore, looks: Looks
    ) -> None:
        histories = [history_of(f"q{i}", f"a{i}") for i in range(50)]
        await asyncio.gather(*(commit(store, h, thread_id=f"t{i}", run_id=f"r{i}") for i, h in enumerate(histories)))
        assert len(await store.list_runs()) == 50
        await looks.expect_history_rows((100, 100))
        for i, history in enumerate(histories):
            thread = await store.load_thread(f"t{i}")
            assert thread is not None and thread.history_revision_id == history.revision_id
            run = await store.load_run(f"r{i}")
            assert run is not None and run.history_revision_id == history.revision_id
        loaded = await asyncio.gather(*(store.load_history(h.revision_id) for h in histories))  # type: ignore[arg-type]
        assert [[m.text for m in h.messages] for h in loaded if h is not None] == [
            [f"q{i}", f"a{i}"] for i in range(50)
        ]

    async def test_a_reopened_store_keeps_everything(self, store: SessionStore, looks: Looks) -> None:
        main = MessageHistory()
        main.extend(rich_messages())
        runs = full_runs("main", main.revision_id)
        await store.commit_session(
            run=runs[0], thread=ThreadState(thread_id="main", history_revision_id=main.revision_id), history=main
        )
        await store.save(runs[1])
        fork = main.branch(main.lineage()[2].id)
        fork.append(ModelMessage.user("forked"))
        await commit(store, fork, thread_id="fork", run_id="r-fork", updated_at=5)
        expected = {
            "runs": await store.list_runs(),
            "threads": [await store.load_thread(t) for t in ("main", "fork")],
            "main": await store.load_history(main.revision_id),  # type: ignore[arg-type]
            "fork": await store.load_history(fork.revision_id),  # type: ignore[arg-type]
            "rows": await looks.history_rows(),
        }
        await store.close()

        async with await looks.reopen() as again:
            assert await again.list_runs() == expected["runs"]
            assert [await again.load_thread(t) for t in ("main", "fork")] == expected["threads"]
            assert await again.load_history(main.revision_id) == expected["main"]  # type: ignore[arg-type]
            assert await again.load_history(fork.revision_id) == expected["fork"]  # type: ignore[arg-type]
            # The probe now looks at the reopened store: it counts what that one found.
            rows = (len(rich_messages()) + 1,) * 2
            assert expected["rows"] in (None, rows)
            await looks.expect_history_rows(rows)
            # And it takes the next step on top of what it found.
            fork.append(ModelMessage.assistant("after reopen"))
            await commit(again, fork, thread_id="fork", run_id="r-fork", base=fork.lineage()[-2].id)
            loaded = await again.load_history(fork.revision_id)  # type: ignore[arg-type]
            assert loaded is not None and loaded.messages[-2:] == fork.messages[-2:]

    # -- awkward data ------------------------------------------------------------------------------

    async def test_a_one_megabyte_message_round_trips(self, store: SessionStore) -> None:
        big = "".join(chr(0x20 + (i % 0x5F)) for i in range(1 << 20))
        history = MessageHistory()
        history.append(ModelMessage.user(big))
        result = ToolResultPart(tool_call_id="c", tool_name="dump", result={"blob": big + "é" * 1000})
        history.append(ModelMessage(role="tool", parts=[result]))
        await commit(store, history)
        loaded = await store.load_history(history.revision_id)  # type: ignore[arg-type]
        assert loaded is not None
        assert loaded.messages[0].text == big
        assert loaded.messages[1].parts == [result]

    async def test_unicode_and_nul_round_trip(self, store: SessionStore) -> None:
        history = MessageHistory()
        for text in AWKWARD_TEXTS:
            history.append(ModelMessage(role="assistant", parts=[TextPart(text=text)]))
        run, thread = pointers(history, result=AWKWARD_TEXTS[2], scratch={t: t for t in AWKWARD_TEXTS})
        await store.commit_session(run=run, thread=thread, history=history)
        loaded = await store.load_history(history.revision_id)  # type: ignore[arg-type]
        assert loaded is not None
        assert [m.text for m in loaded.messages] == AWKWARD_TEXTS
        assert await store.load_run("r") == run

    async def test_ids_with_quotes_and_sql_metacharacters(self, store: SessionStore) -> None:
        for i, weird in enumerate(AWKWARD_IDS):
            history = history_of(f"message {i}")
            await commit(store, history, thread_id=weird, run_id=weird)
            run = await store.load_run(weird)
            assert run is not None and run.run_id == weird and run.thread_id == weird
            thread = await store.load_thread(weird)
            assert thread is not None and thread.history_revision_id == history.revision_id
            assert [r.run_id for r in await store.list_runs(weird)] == [weird]
        assert sorted(r.run_id for r in await store.list_runs()) == sorted(AWKWARD_IDS)
        await store.delete_run(AWKWARD_IDS[0])
        assert await store.load_run(AWKWARD_IDS[0]) is None
        assert len(await store.list_runs()) == len(AWKWARD_IDS) - 1

    # -- lifecycle ---------------------------------------------------------------------------------

    @pytest.mark.parametrize("call", CLOSED_CALLS.values(), ids=CLOSED_CALLS.keys())
    async def test_a_closed_store_raises_store_error(
        self, store: SessionStore, call: Callable[[SessionStore], Awaitable[object]]
    ) -> None:
        await commit(store, history_of("a"))
        await store.close()
        with pytest.raises(StoreError, match="closed"):
            await call(store)
        await store.close()  # closing twice is harmless

    async def test_async_with_closes_the_store(self, store: SessionStore) -> None:
        async with store as entered:
            assert entered is store
            await store.save(RunState(run_id="r", thread_id="t"))
        with pytest.raises(StoreError):
            await store.load_run("r")
