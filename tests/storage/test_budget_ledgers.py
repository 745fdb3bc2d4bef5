"""The stores' ledger tables (schema version 13) on the paths ``BudgetConformance`` does not reach.

The contract runs on every backend in ``tests/testing/conformance``. Here: a checkpoint that also
rewrites its turn and session (a statement of its own on PostgreSQL) adds its spend, or nothing
when refused; a group-commit batch with refused members adds the spend of the others only; sessions
of two trees sharing an owner's ledger commit in parallel batches without deadlocking (PostgreSQL
locks a batch's ledger rows in one order); a commit without spend runs no ledger statement; and a
file or database of version 12 gains the table.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from repertory.core.budget import Budget, BudgetStore, Spend, SpendDelta, owner_scope, tree_scope
from repertory.core.history import MessageHistory
from repertory.core.messages import ModelMessage
from repertory.core.store import TreeStore
from repertory.errors import CommitConflict
from repertory.storage import SqliteSessionStore
from repertory.storage.postgres.schema import MIGRATIONS as PG_MIGRATIONS
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.storage.sqlite.schema import _MIGRATIONS as SQLITE_MIGRATIONS
from repertory.testing.conformance.records import history_of, pointers
from repertory.testing.conformance.tree_records import session_record, turn_record
from repertory.testing.pg_temp import TemporaryPostgres
from tests.conftest import empty_store

ONE = Spend(cost=0.5, tokens=10, model_requests=1, tool_calls=1)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TreeStore]:
    async with empty_store(request.param, request, tmp_path / "ledgers.db") as opened:
        yield opened


async def _spent(store: TreeStore, scope: str) -> Spend:
    assert isinstance(store, BudgetStore)
    return (await store.load_ledgers([scope]))[scope].spend


async def test_a_checkpoint_rewriting_its_turn_and_session_adds_its_spend_or_nothing_when_refused(
    store: TreeStore,
) -> None:
    assert isinstance(store, BudgetStore)
    scope = tree_scope("s")
    await store.set_budget(scope, Budget(max_cost=10.0))
    await store.create_session(session_record("s"))
    queued = await store.add_turn(turn_record("s", "t1", run_id="r"))
    history = history_of("first")
    run, thread = pointers(history, thread_id="s", run_id="r")
    started = queued.model_copy(update={"status": "running", "updated_at": 5_000})
    renamed = session_record("s", title="renamed", updated_at=5_000)
    await store.commit_session(
        run=run, thread=thread, history=history, turn=started, session=renamed, spend=SpendDelta((scope,), ONE)
    )
    assert await _spent(store, scope) == ONE
    stored = await store.load_turn("t1")
    assert stored is not None and stored.status == "running"

    # The same checkpoint again claims no head: refused whole, turn, session and spend alike.
    ended = started.model_copy(update={"status": "done", "updated_at": 6_000})
    with pytest.raises(CommitConflict):
        await store.commit_session(
            run=run, thread=thread, history=history, turn=ended, session=renamed, spend=SpendDelta((scope,), ONE)
        )
    assert await _spent(store, scope) == ONE
    stored = await store.load_turn("t1")
    assert stored is not None and stored.status == "running"


async def test_a_batch_with_refused_members_adds_the_spend_of_the_others_only(store: TreeStore) -> None:
    assert isinstance(store, BudgetStore)
    scope = tree_scope("root")
    await store.set_budget(scope, Budget(max_cost=100.0))
    histories: list[MessageHistory] = []
    for i in range(24):
        history = history_of(f"first {i}")
        run, thread = pointers(history, thread_id=f"t{i}", run_id=f"r{i}")
        await store.commit_session(run=run, thread=thread, history=history)
        histories.append(history)
    before = getattr(store, "group_commit_counts", None)

    async def step(i: int) -> None:
        """The next checkpoint of thread ``i``; every third claims no head and is refused."""
        history = histories[i].branch()
        history.append(ModelMessage.assistant(f"step {i}"))
        run, thread = pointers(history, thread_id=f"t{i}", run_id=f"r{i}", step_index=1)
        base = None if i % 3 == 0 else histories[i].revision_id
        await store.commit_session(
            run=run, thread=thread, history=history, base_revision_id=base, spend=SpendDelta((scope,), ONE)
        )

    outcomes = await asyncio.gather(*(step(i) for i in range(24)), return_exceptions=True)
    assert [isinstance(o, CommitConflict) for o in outcomes] == [i % 3 == 0 for i in range(24)]
    spent = await _spent(store, scope)
    assert (spent.tokens, spent.model_requests, spent.tool_calls) == (160, 16, 16)
    assert abs(spent.cost - 8.0) < 1e-9
    after = getattr(store, "group_commit_counts", None)
    if before is not None and after is not None:  # the commits did share batches
        assert after[1] - before[1] > after[0] - before[0]


async def test_trees_sharing_an_owner_commit_in_parallel_and_each_ledger_counts_its_own(store: TreeStore) -> None:
    """Members naming their ledgers in every order, in batches in flight together: none waits forever."""
    assert isinstance(store, BudgetStore)
    a, b, owner = tree_scope("a"), tree_scope("b"), owner_scope("alice")
    for scope in (a, b, owner):
        await store.set_budget(scope, Budget(max_model_requests=1_000))
    orders = [(a,), (owner, b), (b,), (a, owner), (b, owner), (owner, a)]

    async def session(i: int) -> None:
        history = history_of(f"hello {i}")
        run, thread = pointers(history, thread_id=f"t{i}", run_id=f"r{i}")
        scopes = orders[i % len(orders)]
        await store.commit_session(run=run, thread=thread, history=history, spend=SpendDelta(scopes, ONE))
        for k in range(3):
            base = history.revision_id
            history.append(ModelMessage.assistant(f"step {k}"))
            run, thread = pointers(history, thread_id=f"t{i}", run_id=f"r{i}", step_index=k + 1)
            await store.commit_session(
                run=run, thread=thread, history=history, base_revision_id=base, spend=SpendDelta(scopes, ONE)
            )

    await asyncio.wait_for(asyncio.gather(*(session(i) for i in range(48))), timeout=60)
    named = {scope: sum(4 for i in range(48) if scope in orders[i % len(orders)]) for scope in (a, b, owner)}
    assert {scope: (await _spent(store, scope)).model_requests for scope in (a, b, owner)} == named


async def test_a_sqlite_commit_without_spend_runs_no_ledger_statement(tmp_path: Path) -> None:
    async with await SqliteSessionStore.open(tmp_path / "trace.db") as store:
        scope = tree_scope("root")
        await store.set_budget(scope, Budget(max_cost=1.0))
        statements: list[str] = []
        store.trace_writes(statements.append)
        for i, spend in enumerate([None, SpendDelta((scope,), Spend()), SpendDelta((), ONE)]):
            history = history_of(f"hello {i}")
            run, thread = pointers(history, thread_id=f"t{i}", run_id=f"r{i}")
            await store.commit_session(run=run, thread=thread, history=history, spend=spend)
        assert statements and not any("ledgers" in s for s in statements)
        statements.clear()
        history = history_of("spent")
        run, thread = pointers(history, thread_id="spent", run_id="spent")
        await store.commit_session(run=run, thread=thread, history=history, spend=SpendDelta((scope, scope), ONE))
        store.trace_writes(None)
        # One statement, inside the commit's own transaction (the last before its COMMIT).
        assert [s.split()[:2] for s in statements if "ledgers" in s] == [["UPDATE", "ledgers"]]
        assert "ledgers" in statements[-2] and statements[-1] == "COMMIT"
        assert await _spent(store, scope) == ONE


def _sqlite_tables(path: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


async def test_a_version_12_sqlite_file_gains_the_ledgers(tmp_path: Path) -> None:
    path = tmp_path / "v12.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        for target in range(1, 13):
            for statement in SQLITE_MIGRATIONS[target]:
                conn.execute(statement)
        conn.execute("INSERT INTO repertory_meta (key, value) VALUES ('schema_version', '12')")
        conn.execute("COMMIT")
    finally:
        conn.close()
    assert "ledgers" not in _sqlite_tables(path)
    async with await SqliteSessionStore.open(path) as store:
        assert "ledgers" in _sqlite_tables(path)
        await _spend_once(store)


async def _spend_once(store: TreeStore) -> None:
    assert isinstance(store, BudgetStore)
    scope = owner_scope("alice")
    await store.set_budget(scope, Budget(max_tokens=100))
    history = history_of("hello")
    run, thread = pointers(history, thread_id="t", run_id="r")
    await store.commit_session(run=run, thread=thread, history=history, spend=SpendDelta((scope,), ONE))
    assert await _spent(store, scope) == ONE


@pytest.fixture
def fresh_pg_url(pg_server: TemporaryPostgres) -> Iterator[str]:
    """The URL of a database of its own, dropped afterwards."""
    name = f"ledgers_{secrets.token_hex(6)}"
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield pg_server.url_for(database=name)
    finally:
        with psycopg.connect(pg_server.url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


async def test_a_version_12_postgres_database_gains_the_ledgers(fresh_pg_url: str) -> None:
    with psycopg.connect(fresh_pg_url, autocommit=True) as conn, conn.transaction():
        conn.execute("CREATE SCHEMA repertory")
        for target in range(1, 13):
            for statement in PG_MIGRATIONS[target]:
                conn.execute(statement)
        conn.execute("INSERT INTO repertory.meta (key, value) VALUES ('schema_version', '12')")
    async with await PostgresSessionStore.open(fresh_pg_url) as store:
        await _spend_once(store)
