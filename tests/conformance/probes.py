"""Backend-specific looks under the ``SessionStore`` protocol, for the few tests that need them.

Each probe dispatches on the store's class; a new backend registers its own implementation here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import singledispatch
from typing import Any

import psycopg
import pytest

from repertory.errors import StoreError
from repertory.storage import InMemorySessionStore, SessionStore, SqliteSessionStore
from repertory.storage.postgres import store as pg_module
from repertory.storage.postgres.store import PostgresSessionStore

__all__ = [
    "HistoryWrites",
    "InjectedFailure",
    "arm_commit_failure",
    "arm_commit_time_failure",
    "arm_run_failure",
    "history_row_counts",
    "history_writes",
    "holds_entry",
    "reopen",
]

INJECTED = "injected failure"


class InjectedFailure(RuntimeError):
    """What an armed in-memory store raises from the middle of a commit."""


def _unknown(store: object) -> Any:
    raise NotImplementedError(f"tests/conformance/probes.py does not know {type(store).__name__}")


@singledispatch
def history_row_counts(store: SessionStore) -> tuple[int, int]:
    """How many history entries and revisions the store holds, counted in its own storage."""
    return _unknown(store)  # type: ignore[no-any-return]


@history_row_counts.register
def _(store: InMemorySessionStore) -> tuple[int, int]:
    return len(store._entries), len(store._revisions)


@history_row_counts.register
def _(store: SqliteSessionStore) -> tuple[int, int]:
    entries = store._writer.execute("SELECT count(*) FROM history_entries").fetchone()[0]
    revisions = store._writer.execute("SELECT count(*) FROM history_revisions").fetchone()[0]
    return int(entries), int(revisions)


@history_row_counts.register
def _(store: PostgresSessionStore) -> tuple[int, int]:
    with psycopg.connect(store._conninfo, autocommit=True) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM repertory.history_entries), "
            "(SELECT count(*) FROM repertory.history_revisions)"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


@singledispatch
def holds_entry(store: SessionStore, entry_id: str) -> bool:
    """Whether the store holds a history entry with this id."""
    return _unknown(store)  # type: ignore[no-any-return]


@holds_entry.register
def _(store: InMemorySessionStore, entry_id: str) -> bool:
    return entry_id in store._entries


@holds_entry.register
def _(store: SqliteSessionStore, entry_id: str) -> bool:
    row = store._writer.execute("SELECT 1 FROM history_entries WHERE id = ?", (entry_id,)).fetchone()
    return row is not None


@holds_entry.register
def _(store: PostgresSessionStore, entry_id: str) -> bool:
    with psycopg.connect(store._conninfo, autocommit=True) as conn:
        row = conn.execute("SELECT 1 FROM repertory.history_entries WHERE id = %s", (entry_id,)).fetchone()
    return row is not None


@dataclass
class HistoryWrites:
    """History rows a store tried to write (including writes it then ignored as duplicates)."""

    entries: int = 0
    revisions: int = 0


@singledispatch
def history_writes(store: SessionStore) -> contextlib.AbstractContextManager[HistoryWrites]:
    """Count the history writes the store attempts while the context is open.

    Row counts cannot tell a commit that rewrote a shared prefix (``INSERT OR IGNORE``) from one
    that skipped it; this can.
    """
    return _unknown(store)  # type: ignore[no-any-return]


@history_writes.register
@contextlib.contextmanager
def _(store: InMemorySessionStore) -> Iterator[HistoryWrites]:
    writes = HistoryWrites()

    class Counting(dict[Any, Any]):
        def __init__(self, source: dict[Any, Any], field: str) -> None:
            super().__init__(source)
            self.field = field

        def _count(self) -> None:
            setattr(writes, self.field, getattr(writes, self.field) + 1)

        def __setitem__(self, key: Any, value: Any) -> None:
            self._count()
            super().__setitem__(key, value)

        def setdefault(self, key: Any, default: Any = None) -> Any:
            self._count()
            return super().setdefault(key, default)

    entries, revisions = store._entries, store._revisions
    store._entries, store._revisions = Counting(entries, "entries"), Counting(revisions, "revisions")
    try:
        yield writes
    finally:
        entries.update(store._entries)
        revisions.update(store._revisions)
        store._entries, store._revisions = entries, revisions


@history_writes.register
@contextlib.contextmanager
def _(store: SqliteSessionStore) -> Iterator[HistoryWrites]:
    writes = HistoryWrites()

    def trace(statement: str) -> None:
        # The trace sees each execution, one per row of an executemany.
        text = " ".join(statement.split()).upper()
        if text.startswith("INSERT") and " INTO HISTORY_ENTRIES " in text:
            writes.entries += 1
        elif text.startswith("INSERT") and " INTO HISTORY_REVISIONS " in text:
            writes.revisions += 1

    store._writer.set_trace_callback(trace)
    try:
        yield writes
    finally:
        store._writer.set_trace_callback(None)


@history_writes.register
@contextlib.contextmanager
def _(store: PostgresSessionStore) -> Iterator[HistoryWrites]:
    # The commit function receives the delta as arrays; count what the store plans to send.
    writes = HistoryWrites()
    # Patched where the store looks it up (its own module), which does not re-export it.
    original = pg_module.plan_commit_async  # type: ignore[attr-defined]

    async def counting(*args: Any, **kwargs: Any) -> Any:
        delta = await original(*args, **kwargs)
        writes.entries += len(delta.entries)
        writes.revisions += len(delta.revisions)
        return delta

    pg_module.plan_commit_async = counting  # type: ignore[attr-defined]
    try:
        yield writes
    finally:
        pg_module.plan_commit_async = original  # type: ignore[attr-defined]


@singledispatch
def arm_commit_failure(store: SessionStore) -> contextlib.AbstractContextManager[type[BaseException]]:
    """While the context is open, a commit fails partway through; yields the exception type raised."""
    return _unknown(store)  # type: ignore[no-any-return]


class _FailingRuns(dict[Any, Any]):
    def __setitem__(self, key: Any, value: Any) -> None:
        raise InjectedFailure(INJECTED)


@arm_commit_failure.register
@contextlib.contextmanager
def _(store: InMemorySessionStore) -> Iterator[type[BaseException]]:
    # The memory store writes the run row first, so the failure lands before anything else.
    original = store._runs
    store._runs = _FailingRuns(original)
    try:
        yield InjectedFailure
    finally:
        store._runs = original


_TRIGGERS = ("repertory_test_fail_insert", "repertory_test_fail_update")


@arm_commit_failure.register
@contextlib.contextmanager
def _(store: SqliteSessionStore) -> Iterator[type[BaseException]]:
    # History rows are inserted before the run row inside the transaction, so a trigger on the run
    # upsert fails the commit halfway through. The upsert may take the INSERT or the UPDATE path.
    conn = store._writer
    for name, event in zip(_TRIGGERS, ("INSERT", "UPDATE"), strict=True):
        conn.execute(
            f"CREATE TEMP TRIGGER {name} BEFORE {event} ON main.runs BEGIN SELECT RAISE(ABORT, '{INJECTED}'); END"
        )
    try:
        yield StoreError
    finally:
        for name in _TRIGGERS:
            conn.execute(f"DROP TRIGGER IF EXISTS temp.{name}")


_PG_FAIL = f"""
CREATE OR REPLACE FUNCTION repertory.test_fail() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION '{INJECTED}'; END $$;
CREATE TRIGGER test_fail BEFORE INSERT OR UPDATE ON repertory.runs FOR EACH ROW EXECUTE FUNCTION repertory.test_fail();
"""


@arm_commit_failure.register
@contextlib.contextmanager
def _(store: PostgresSessionStore) -> Iterator[type[BaseException]]:
    # The run row is written after the history rows inside the commit function's transaction.
    with psycopg.connect(store._conninfo, autocommit=True) as conn:
        conn.execute(_PG_FAIL)
    try:
        yield StoreError
    finally:
        with psycopg.connect(store._conninfo, autocommit=True) as conn:
            conn.execute("DROP TRIGGER IF EXISTS test_fail ON repertory.runs")


@singledispatch
def arm_run_failure(store: SessionStore, run_id: str) -> contextlib.AbstractContextManager[type[BaseException]]:
    """While the context is open, a commit that writes run ``run_id`` fails partway; others are untouched."""
    return _unknown(store)  # type: ignore[no-any-return]


class _FailingRun(dict[Any, Any]):
    def __init__(self, source: dict[Any, Any], run_id: str) -> None:
        super().__init__(source)
        self.run_id = run_id

    def __setitem__(self, key: Any, value: Any) -> None:
        if key == self.run_id:
            raise InjectedFailure(INJECTED)
        super().__setitem__(key, value)


@arm_run_failure.register
@contextlib.contextmanager
def _(store: InMemorySessionStore, run_id: str) -> Iterator[type[BaseException]]:
    original = store._runs
    store._runs = _FailingRun(original, run_id)
    try:
        yield InjectedFailure
    finally:
        original.update(store._runs)
        store._runs = original


@arm_run_failure.register
@contextlib.contextmanager
def _(store: SqliteSessionStore, run_id: str) -> Iterator[type[BaseException]]:
    conn = store._writer
    quoted = run_id.replace("'", "''")
    for name, event in zip(_TRIGGERS, ("INSERT", "UPDATE"), strict=True):
        conn.execute(
            f"CREATE TEMP TRIGGER {name} BEFORE {event} ON main.runs WHEN NEW.run_id = '{quoted}' "
            f"BEGIN SELECT RAISE(ABORT, '{INJECTED}'); END"
        )
    try:
        yield StoreError
    finally:
        for name in _TRIGGERS:
            conn.execute(f"DROP TRIGGER IF EXISTS temp.{name}")


_PG_FAIL_RUN = """
CREATE OR REPLACE FUNCTION repertory.test_fail_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.run_id = TG_ARGV[0] THEN RAISE EXCEPTION '{injected}'; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER test_fail_run BEFORE INSERT OR UPDATE ON repertory.runs
FOR EACH ROW EXECUTE FUNCTION repertory.test_fail_run('{run_id}');
"""


@arm_run_failure.register
@contextlib.contextmanager
def _(store: PostgresSessionStore, run_id: str) -> Iterator[type[BaseException]]:
    with psycopg.connect(store._conninfo, autocommit=True) as conn:
        conn.execute(_PG_FAIL_RUN.format(injected=INJECTED, run_id=run_id.replace("'", "''")))
    try:
        yield StoreError
    finally:
        with psycopg.connect(store._conninfo, autocommit=True) as conn:
            conn.execute("DROP TRIGGER IF EXISTS test_fail_run ON repertory.runs")


@singledispatch
def arm_commit_time_failure(store: SessionStore) -> contextlib.AbstractContextManager[type[BaseException]]:
    """While the context is open, every transaction that writes a run fails at ``COMMIT`` itself.

    Every statement succeeds and only the commit fails, so a store that shares transactions
    between callers (group commit) must fail every one of them. The memory store has no commit.
    """
    return _unknown(store)  # type: ignore[no-any-return]


@arm_commit_time_failure.register
@contextlib.contextmanager
def _(store: InMemorySessionStore) -> Iterator[type[BaseException]]:
    pytest.skip("the memory store has no transactions to fail at commit")
    yield StoreError  # pragma: no cover


@arm_commit_time_failure.register
@contextlib.contextmanager
def _(store: SqliteSessionStore) -> Iterator[type[BaseException]]:
    # A deferred foreign key is checked at COMMIT: a trigger leaves a dangling reference behind.
    conn = store._writer
    conn.execute("CREATE TABLE IF NOT EXISTS test_parent (id INTEGER PRIMARY KEY)")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS test_child "
        "(parent INTEGER REFERENCES test_parent (id) DEFERRABLE INITIALLY DEFERRED)"
    )
    conn.execute("PRAGMA foreign_keys = ON")
    for name, event in zip(_TRIGGERS, ("INSERT", "UPDATE"), strict=True):
        conn.execute(
            f"CREATE TEMP TRIGGER {name} AFTER {event} ON main.runs BEGIN INSERT INTO test_child VALUES (-1); END"
        )
    try:
        yield StoreError
    finally:
        for name in _TRIGGERS:
            conn.execute(f"DROP TRIGGER IF EXISTS temp.{name}")
        conn.execute("PRAGMA foreign_keys = OFF")


_PG_FAIL_AT_COMMIT = f"""
CREATE OR REPLACE FUNCTION repertory.test_fail_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION '{INJECTED} at commit'; END $$;
CREATE CONSTRAINT TRIGGER test_fail_at_commit AFTER INSERT OR UPDATE ON repertory.runs
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION repertory.test_fail_at_commit();
"""


@arm_commit_time_failure.register
@contextlib.contextmanager
def _(store: PostgresSessionStore) -> Iterator[type[BaseException]]:
    with psycopg.connect(store._conninfo, autocommit=True) as conn:
        conn.execute(_PG_FAIL_AT_COMMIT)
    try:
        yield StoreError
    finally:
        with psycopg.connect(store._conninfo, autocommit=True) as conn:
            conn.execute("DROP TRIGGER IF EXISTS test_fail_at_commit ON repertory.runs")


@singledispatch
async def reopen(store: SessionStore) -> SessionStore:
    """A fresh store over the same durable data (only for backends registered ``durable``)."""
    return _unknown(store)  # type: ignore[no-any-return]


@reopen.register
async def _(store: SqliteSessionStore) -> SessionStore:
    return await SqliteSessionStore.open(store.path, durability=store.durability, group_commit=store.group_commit)


@reopen.register
async def _(store: PostgresSessionStore) -> SessionStore:
    return await PostgresSessionStore.open(store._conninfo, group_commit=store.group_commit)
