"""``GroupCommit`` itself, and how the SQLite and PostgreSQL stores switch it on and off.

What a commit must guarantee under group commit (its own guards, its own error, durability) is in
``tests/testing/conformance/test_group_commit_conformance.py``, run against every backend; here is the
batching: what goes together, what goes alone, bounds, cancellation and failure of a whole batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from repertory.core.messages import ModelMessage
from repertory.errors import CommitConflict, StoreError
from repertory.storage import SqliteSessionStore, open_store
from repertory.storage.group_commit import Failed, GroupCommit, take_switch
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.testing.pg_temp import TemporaryPostgres
from tests.records import commit, history_of


class Recorder:
    """A flush that records its batches; work ``"fail:x"`` fails with ``ValueError("x")``."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.gate: asyncio.Event | None = None
        self.inflight = 0
        self.most_inflight = 0

    async def flush(self, batch: Sequence[str]) -> list[str | Failed]:
        self.batches.append(list(batch))
        self.inflight += 1
        self.most_inflight = max(self.most_inflight, self.inflight)
        try:
            if self.gate is not None:
                await self.gate.wait()
        finally:
            self.inflight -= 1
        return [Failed(ValueError(w[5:])) if w.startswith("fail:") else w.upper() for w in batch]


async def test_a_lone_write_goes_straight_through_without_a_turn_of_the_loop() -> None:
    rec = Recorder()
    group: GroupCommit[str, str] = GroupCommit(rec.flush)
    turned = False

    def turn() -> None:
        nonlocal turned
        turned = True

    asyncio.get_running_loop().call_soon(turn)
    assert await group.submit("a") == "A"
    assert await group.submit("b") == "B"  # the same task writing again is still alone
    assert not turned
    assert rec.batches == [["a"], ["b"]]
    assert (group.batches, group.members) == (2, 2)


async def test_writes_launched_together_share_a_batch_and_keep_their_own_outcomes() -> None:
    rec = Recorder()
    group: GroupCommit[str, str] = GroupCommit(rec.flush)
    outcomes = await asyncio.gather(
        group.submit("a"), group.submit("fail:bad b"), group.submit("c"), return_exceptions=True
    )
    # The first found the writer idle; the next two came in the same turn of the loop: one batch.
    assert rec.batches == [["a"], ["fail:bad b", "c"]]
    assert outcomes[0] == "A" and outcomes[2] == "C"
    assert isinstance(outcomes[1], ValueError) and str(outcomes[1]) == "bad b"
    # Still batching: the next burst shares one transaction entirely.
    await asyncio.gather(group.submit("d"), group.submit("e"))
    assert rec.batches[-1] == ["d", "e"]
    # A batch of one ends the burst: writes go straight through again.
    await asyncio.gather(group.submit("f"))
    await group.submit("g")
    assert rec.batches[-2:] == [["f"], ["g"]]
    assert (group.batches, group.members) == (5, 7)


async def test_batches_are_bounded_and_keep_submission_order() -> None:
    rec = Recorder()
    group: GroupCommit[str, str] = GroupCommit(rec.flush, max_batch=4)
    await asyncio.gather(*(group.submit(str(i)) for i in range(10)))
    assert rec.batches == [["0"], ["1", "2", "3", "4"], ["5", "6", "7", "8"], ["9"]]


async def test_a_flush_that_raises_fails_every_member_and_the_next_batch_still_runs() -> None:
    calls = 0

    async def broken(batch: Sequence[str]) -> list[str | Failed]:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise RuntimeError("the transaction failed")
        return list(batch)

    group: GroupCommit[str, str] = GroupCommit(broken)
    outcomes = await asyncio.gather(group.submit("a"), group.submit("b"), group.submit("c"), return_exceptions=True)
    assert outcomes[0] == "a"
    assert all(isinstance(o, RuntimeError) for o in outcomes[1:])
    assert await group.submit("d") == "d"


async def test_a_caller_cancelled_while_queued_is_never_written() -> None:
    rec = Recorder()
    group: GroupCommit[str, str] = GroupCommit(rec.flush)
    first = asyncio.ensure_future(group.submit("first"))
    doomed = asyncio.ensure_future(group.submit("doomed"))
    kept = asyncio.ensure_future(group.submit("kept"))
    await asyncio.sleep(0)  # the first went straight through; the others are queued, not yet written
    doomed.cancel()
    assert await first == "FIRST"
    assert await kept == "KEPT"
    with pytest.raises(asyncio.CancelledError):
        await doomed
    assert rec.batches == [["first"], ["kept"]]


async def test_transactions_in_flight_are_bounded_and_drain_waits_for_them() -> None:
    rec = Recorder()
    rec.gate = asyncio.Event()
    group: GroupCommit[str, str] = GroupCommit(rec.flush, max_inflight=2)
    lone = asyncio.ensure_future(group.submit("a"))  # straight through, then held at the gate
    await asyncio.sleep(0.01)
    queued = [asyncio.ensure_future(group.submit(w)) for w in ("b", "c")]
    await asyncio.sleep(0.01)
    more = asyncio.ensure_future(group.submit("d"))  # two transactions are running: it waits its turn
    await asyncio.sleep(0.01)
    assert rec.inflight == 2 and rec.batches == [["a"], ["b", "c"]]
    drained = asyncio.ensure_future(group.drain())
    await asyncio.sleep(0.01)
    assert not drained.done()
    rec.gate.set()
    await drained
    assert [lone.result(), *(q.result() for q in queued), more.result()] == ["A", "B", "C", "D"]
    assert rec.batches[-1] == ["d"] and rec.most_inflight == 2


def test_limits_are_checked() -> None:
    async def flush(batch: Sequence[str]) -> list[str | Failed]:
        return list(batch)

    with pytest.raises(ValueError):
        GroupCommit(flush, max_batch=0)
    with pytest.raises(ValueError):
        GroupCommit(flush, max_inflight=0)


# -- the stores -------------------------------------------------------------------------------------


async def test_sqlite_groups_concurrent_commits_and_runs_a_lone_one_without_savepoints(tmp_path: Path) -> None:
    async with await SqliteSessionStore.open(tmp_path / "g.db") as store:
        assert store.group_commit and store.group_writer is not None
        statements: list[str] = []
        store.trace_writes(statements.append)
        await commit(store, history_of("alone"), thread_id="lone", run_id="lone")
        assert not any("SAVEPOINT" in s for s in statements)
        assert sum(s == "COMMIT" for s in statements) == 1
        statements.clear()
        histories = [history_of(f"m{i}") for i in range(50)]
        await asyncio.gather(*(commit(store, h, thread_id=f"t{i}", run_id=f"r{i}") for i, h in enumerate(histories)))
        store.trace_writes(None)
        # The first of fifty found the writer idle; the other 49 shared one transaction, and since
        # none of them failed, that transaction ran them straight through, with no savepoint.
        assert sum(s == "COMMIT" for s in statements) == 2
        assert not any("SAVEPOINT" in s for s in statements)
        assert store.group_writer.batches == 3 and store.group_writer.members == 51


async def test_sqlite_reruns_a_batch_in_savepoints_when_one_member_is_refused(tmp_path: Path) -> None:
    """A refused member costs its batch one rollback and a rerun in savepoints; only it fails."""
    async with await SqliteSessionStore.open(tmp_path / "g.db") as store:
        histories = [history_of(f"q{i}") for i in range(6)]
        for i, h in enumerate(histories):
            await commit(store, h, thread_id=f"t{i}", run_id=f"r{i}")
        branches = []
        for i, h in enumerate(histories):
            branch = h.branch()
            branch.append(ModelMessage.assistant(f"a{i}"))
            branches.append(branch)
        stale = histories[3].branch()
        stale.append(ModelMessage.assistant("stale"))
        statements: list[str] = []
        store.trace_writes(statements.append)
        outcomes = await asyncio.gather(
            *(
                commit(store, b, thread_id=f"t{i}", run_id=f"r{i}", base=histories[i].revision_id)
                for i, b in enumerate(branches)
            ),
            commit(store, stale, thread_id="t3", run_id="r3", base=histories[3].revision_id),
            return_exceptions=True,
        )
        store.trace_writes(None)
        assert [isinstance(o, BaseException) for o in outcomes] == [False] * 6 + [True]
        assert isinstance(outcomes[-1], CommitConflict) and "'t3'" in str(outcomes[-1])
        assert "ROLLBACK" in statements and sum(s == "SAVEPOINT member" for s in statements) == 6
        for i, branch in enumerate(branches):
            thread = await store.load_thread(f"t{i}")
            assert thread is not None and thread.history_revision_id == branch.revision_id
            loaded = await store.load_history(branch.revision_id or "")
            assert loaded is not None and [m.text for m in loaded.messages] == [f"q{i}", f"a{i}"]
        assert await store.load_history(stale.revision_id or "") is None


async def test_sqlite_with_group_commit_off_commits_each_write_alone(tmp_path: Path) -> None:
    async with await SqliteSessionStore.open(tmp_path / "g.db", group_commit=False) as store:
        assert not store.group_commit and store.group_writer is None
        statements: list[str] = []
        store.trace_writes(statements.append)
        histories = [history_of(f"m{i}") for i in range(5)]
        await asyncio.gather(*(commit(store, h, thread_id=f"t{i}", run_id=f"r{i}") for i, h in enumerate(histories)))
        store.trace_writes(None)
        assert sum(s == "COMMIT" for s in statements) == 5
        assert not any("SAVEPOINT" in s for s in statements)


async def test_closing_a_sqlite_store_lets_queued_writes_commit(tmp_path: Path) -> None:
    store = await SqliteSessionStore.open(tmp_path / "g.db")
    pending = [
        asyncio.ensure_future(commit(store, history_of("x"), thread_id=f"t{i}", run_id=f"r{i}")) for i in range(5)
    ]
    await asyncio.sleep(0)  # queued, not yet written
    await store.close()
    await asyncio.gather(*pending)
    async with await SqliteSessionStore.open(tmp_path / "g.db") as again:
        assert len(await again.list_runs()) == 5


@pytest.mark.parametrize(
    ("query", "expected"),
    [("", True), ("?group_commit=off", False), ("?group_commit=on&durability=full", True), ("?group_commit=0", False)],
)
async def test_the_sqlite_url_switches_group_commit(tmp_path: Path, query: str, expected: bool) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'u.db'}{query}")
    try:
        assert isinstance(store, SqliteSessionStore) and store.group_commit is expected
    finally:
        await store.close()


async def test_a_bad_group_commit_value_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="group_commit"):
        await open_store(f"sqlite:///{tmp_path / 'u.db'}?group_commit=sometimes")


def test_take_switch_removes_only_the_option() -> None:
    assert take_switch("postgresql://u@h/db", "group_commit") == ("postgresql://u@h/db", None)
    assert take_switch("postgresql://u@h/db?group_commit=off", "group_commit") == ("postgresql://u@h/db", False)
    assert take_switch("postgresql://u@h/db?sslmode=disable&group_commit=on", "group_commit") == (
        "postgresql://u@h/db?sslmode=disable",
        True,
    )


async def test_postgres_takes_group_commit_from_the_url_or_the_argument(pg_server: TemporaryPostgres) -> None:
    async with await PostgresSessionStore.open(pg_server.url) as store:
        assert store.group_commit
    async with await PostgresSessionStore.open(pg_server.url + "?group_commit=off") as store:
        assert not store.group_commit
        await commit(store, history_of("x"), thread_id="pg-off", run_id="pg-off")
        assert await store.load_run("pg-off") is not None
    async with await PostgresSessionStore.open(pg_server.url + "?group_commit=off", group_commit=True) as store:
        assert store.group_commit


def test_a_store_keeps_working_across_event_loops(tmp_path: Path) -> None:
    # A store may outlive the loop it first wrote on (a notebook re-running cells, nested asyncio.run).
    store = asyncio.run(SqliteSessionStore.open(tmp_path / "loops.db"))

    async def burst(prefix: str) -> None:
        histories = [history_of(f"{prefix}{i}") for i in range(20)]
        await asyncio.gather(
            *(commit(store, h, thread_id=f"{prefix}{i}", run_id=f"{prefix}{i}") for i, h in enumerate(histories))
        )

    asyncio.run(burst("a"))
    asyncio.run(burst("b"))
    assert store.group_writer is not None
    before = (store.group_writer.batches, store.group_writer.members)
    asyncio.run(commit(store, history_of("lone"), thread_id="lone", run_id="lone"))
    assert (store.group_writer.batches, store.group_writer.members) == (before[0] + 1, before[1] + 1)
    asyncio.run(store.close())
    reopened = asyncio.run(SqliteSessionStore.open(tmp_path / "loops.db"))
    assert len(asyncio.run(reopened.list_runs())) == 41
    asyncio.run(reopened.close())


async def test_closing_a_postgres_store_lets_queued_commits_land(pg_server: TemporaryPostgres) -> None:
    store = await PostgresSessionStore.open(pg_server.url)
    histories = [history_of("x") for _ in range(20)]
    for i, h in enumerate(histories):
        await commit(store, h, thread_id=f"close-{i}", run_id=f"close-{i}")
    bases = [h.revision_id for h in histories]
    for h in histories:
        h.append(ModelMessage.assistant("y"))
    pending = [
        asyncio.ensure_future(commit(store, h, thread_id=f"close-{i}", run_id=f"close-{i}", base=bases[i]))
        for i, h in enumerate(histories)
    ]
    await asyncio.sleep(0)  # one is on the wire, the others queued
    await store.close()
    await asyncio.gather(*pending)
    async with await PostgresSessionStore.open(pg_server.url) as again:
        for i, h in enumerate(histories):
            run = await again.load_run(f"close-{i}")
            assert run is not None and run.history_revision_id == h.revision_id
