"""What one turn costs the store, counted in SQL statements and write transactions (issue 21).

A two-step turn (the model asks for a tool, the tool runs, the model answers) on a session already
active: accepting it is one transaction (the turn row, its start and ``turn.started``, and the
thread head read back by the same statement: ``TreeStore.accept_turn``), the tool step a second
(the input, the call and its result, the run row, the head, the events) and the answer a third
(the reply, the run done, the head, the turn's end, ``turn.completed`` and the session's
``updated_at``). The actor reads back nothing it wrote, and reads the thread head (which an HTTP
run from an earlier checkpoint may have moved through the store) only in the write that accepts
the turn. A tool that is not idempotent adds the commit that makes its call durable before it runs.

On SQLite a statement writes one table, so the floor is the tables a turn touches: a checkpoint
writes four (revisions, which carry the step's messages since schema version 7, the run, the head,
events), accepting two (the turn, its event), and the turn's end two more (the turn row, the
session's time): 12 (14 when messages had a table of their own). PostgreSQL runs each write as
one call of a server-side function, so it counts round trips: accepting is one, a checkpoint one,
and the last checkpoint two (the turn and session rows are read to be merged in Python, since the
server cannot rewrite JSON that may hold a NUL).

Counting is not timing: the numbers are the same on any machine, so they are asserted here and a
change that adds a statement to every turn fails this test instead of slowing every deployment.
SQLite counts through trace callbacks on the store's connections, PostgreSQL through a counting
wrapper on psycopg's cursor (psycopg has no trace callback).
"""

from __future__ import annotations

import collections
import contextlib
import re
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from repertory import Agent, Runtime, tool
from repertory.core.messages import ModelMessage
from repertory.storage import SqliteSessionStore
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.testing.pg_temp import TemporaryPostgres
from repertory.testing.scripted import ScriptedModel
from tests.conftest import truncate_pg

_VERB = re.compile(r"^\s*(\w+)")
_TABLE = re.compile(r"\b(?:FROM|INTO|UPDATE)\s+(?:repertory\.)?(\w+)", re.IGNORECASE)
_TRANSACTION_CONTROL = frozenset({"BEGIN", "COMMIT", "ROLLBACK", "END", "SAVEPOINT", "RELEASE"})
_WRITES = frozenset({"INSERT", "UPDATE", "DELETE"})


@dataclass
class Counted:
    """Statements by verb and table (transaction control left out) and write transactions."""

    statements: collections.Counter[str] = field(default_factory=collections.Counter)
    transactions: int = 0
    in_transaction: bool = False

    @property
    def total(self) -> int:
        return sum(self.statements.values())

    def saw(self, sql: str, *, writes: bool | None = None) -> None:
        """Count one statement; an autocommit write (outside BEGIN ... COMMIT) is a transaction of its own."""
        first = _VERB.match(sql)
        if first is None:
            return  # an empty statement: the pool's ping of a connection that sat idle, not the turn's
        verb = first.group(1).upper()
        if verb == "BEGIN":
            self.transactions += 1
            self.in_transaction = True
            return
        if verb in _TRANSACTION_CONTROL:
            if verb != "SAVEPOINT" and verb != "RELEASE":
                self.in_transaction = False
            return
        table = _TABLE.search(sql)
        self.statements[f"{verb} {table.group(1) if table else ''}".strip()] += 1
        if not self.in_transaction and (verb in _WRITES if writes is None else writes):
            self.transactions += 1


@contextlib.contextmanager
def sqlite_counting(store: SqliteSessionStore) -> Iterator[Counted]:
    counted = Counted()
    conns: list[sqlite3.Connection] = store.connections
    for conn in conns:
        conn.set_trace_callback(counted.saw)
    try:
        yield counted
    finally:
        for conn in conns:
            conn.set_trace_callback(None)


@contextlib.contextmanager
def pg_counting(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counted]:
    """Count every statement psycopg sends; a ``transaction()`` block is one write transaction."""
    counted = Counted()
    execute, executemany = psycopg.AsyncCursor.execute, psycopg.AsyncCursor.executemany
    transaction = psycopg.AsyncConnection.transaction

    def text(query: Any) -> str:
        return query if isinstance(query, str) else str(query)

    async def counted_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sql = text(query)
        # The store's functions write (a commit, a turn accepted): called outside a transaction block,
        # each is a transaction of its own.
        counted.saw(sql, writes=True if "repertory.repertory_" in sql else None)
        return await execute(self, query, *args, **kwargs)

    async def counted_executemany(self: Any, query: Any, params: Any, *args: Any, **kwargs: Any) -> Any:
        counted.saw(text(query))  # one statement per call: psycopg pipelines the rows
        return await executemany(self, query, params, *args, **kwargs)

    @contextlib.asynccontextmanager
    async def counted_transaction(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        counted.saw("BEGIN")
        try:
            async with transaction(self, *args, **kwargs) as tx:
                yield tx
        finally:
            counted.saw("COMMIT")

    monkeypatch.setattr(psycopg.AsyncCursor, "execute", counted_execute)
    monkeypatch.setattr(psycopg.AsyncCursor, "executemany", counted_executemany)
    monkeypatch.setattr(psycopg.AsyncConnection, "transaction", counted_transaction)
    yield counted
    monkeypatch.undo()


def _agent(idempotent: bool) -> Agent:
    @tool(idempotent=idempotent)
    def lookup(q: str) -> str:
        return f"found {q}"

    def step(messages: list[ModelMessage], tools: object) -> dict[str, Any]:
        if messages[-1].role == "user":
            return {"tool": "lookup", "args": {"q": "a"}, "usage": {"input_tokens": 1, "output_tokens": 1}}
        return {"text": "done", "usage": {"input_tokens": 1, "output_tokens": 1}}

    return Agent(name="a", model=ScriptedModel(step), tools=[lookup])


async def _second_turn(
    store: Any, idempotent: bool, counting: Callable[[], contextlib.AbstractContextManager[Counted]]
) -> Counted:
    """Run a warm-up turn, then count a second two-step turn from ``send()`` to its result."""
    async with await Runtime.start(store=store, agents={"a": _agent(idempotent)}) as rt:
        h = await rt.create_session(agent="a")
        assert (await h.run("warm")).text == "done"
        with counting() as counted:
            result = await h.run("second")
        assert result.text == "done" and result.status == "done"
        turns = await rt.store.list_turns(h.id)
        assert [t.status for t in turns] == ["done", "done"]
        events = await rt.store.load_events(h.id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert [e.type for e in events].count("turn.completed") == 2
        record = await rt.store.load_session(h.id)
        assert record is not None and record.updated_at == turns[-1].updated_at
    return counted


@pytest.mark.parametrize(
    ("idempotent", "transactions", "statements"),
    [(True, 3, 12), (False, 4, 16)],
    ids=["idempotent-tool", "non-idempotent-tool"],
)
async def test_a_two_step_turn_on_sqlite_costs_few_statements(
    tmp_path: Path, idempotent: bool, transactions: int, statements: int
) -> None:
    async with await SqliteSessionStore.open(tmp_path / "turns.db") as store:  # the runtime does not own it
        counted = await _second_turn(store, idempotent, lambda: sqlite_counting(store))
    shown = dict(counted.statements)
    assert counted.transactions <= transactions, shown
    assert counted.total <= statements, shown
    # Nothing is read at all: the thread head comes back from the statement that accepts the turn.
    assert not [k for k in shown if k.startswith("SELECT")], shown


@pytest.mark.parametrize(
    ("idempotent", "transactions", "statements"),
    [(True, 3, 4), (False, 4, 5)],
    ids=["idempotent-tool", "non-idempotent-tool"],
)
async def test_a_two_step_turn_on_postgres_costs_few_statements(
    pg_server: TemporaryPostgres, monkeypatch: pytest.MonkeyPatch, idempotent: bool, transactions: int, statements: int
) -> None:
    async with await PostgresSessionStore.open(pg_server.url) as store:
        truncate_pg(pg_server.url)
        counted = await _second_turn(store, idempotent, lambda: pg_counting(monkeypatch))
    shown = dict(counted.statements)
    assert counted.transactions <= transactions, shown
    assert counted.total <= statements, shown
