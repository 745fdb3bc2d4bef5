"""``SqliteProbe``: the ``StoreProbe`` of ``SqliteSessionStore``, through its writer connection.

Everything goes through ``SqliteSessionStore.writer_connection``: counts and lookups are plain
queries, writes are counted by the connection's trace callback, and failures are TEMP triggers on
``runs``, which are local to that connection and vanish with it. History rows are inserted before
the run row inside a commit's transaction, so a trigger on the run upsert fails a commit halfway.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import AsyncIterator

from repertory.errors import StoreError
from repertory.storage.sqlite.store import SqliteSessionStore
from repertory.testing.conformance.probe import (
    INJECTED_FAILURE,
    RECORD_COLUMNS,
    HistoryWrites,
    ProbeUnsupported,
    RecordTable,
)

__all__ = ["SqliteProbe"]

# The run upsert may take the INSERT or the UPDATE path, so each failure is a trigger on both.
_LITERAL = re.compile(r"'(?:[^']|'')*'")
_TRIGGERS = (("repertory_probe_insert", "INSERT"), ("repertory_probe_update", "UPDATE"))


class SqliteProbe:
    """Looks under one ``SqliteSessionStore`` (a file or ``":memory:"``)."""

    def __init__(self, store: SqliteSessionStore) -> None:
        self.store = store

    @property
    def _conn(self) -> sqlite3.Connection:
        return self.store.writer_connection

    async def count_history_rows(self) -> tuple[int, int]:
        """Rows of ``history_entries`` (a view: a message inline or in a row of its own) and ``history_revisions``."""
        row = self._conn.execute(
            "SELECT (SELECT count(*) FROM history_entries), (SELECT count(*) FROM history_revisions)"
        ).fetchone()
        return int(row[0]), int(row[1])

    async def holds_history_entry(self, entry_id: str) -> bool:
        """Whether ``history_entries`` (the view over both places a message is kept) has the row."""
        return self._conn.execute("SELECT 1 FROM history_entries WHERE id = ?", (entry_id,)).fetchone() is not None

    @contextlib.asynccontextmanager
    async def count_history_writes(self) -> AsyncIterator[HistoryWrites]:
        """Count history rows offered to ``INSERT`` (the rows of a multi-row ``VALUES``, ignored ones included)."""
        writes = HistoryWrites()

        def trace(statement: str) -> None:
            # The expanded SQL quotes every string (JSON too), so dropping the literals leaves one
            # "(" per row after VALUES.
            text = _LITERAL.sub("''", " ".join(statement.split())).upper()
            rows = text.partition(" VALUES ")[2].count("(")
            # A revision row that carries its message writes its entry too (``sqlite._history``).
            if text.startswith("INSERT") and " INTO HISTORY_ENTRY_ROWS " in text:
                writes.entries += rows
            elif text.startswith("INSERT") and " INTO HISTORY_REVISIONS " in text:
                writes.revisions += rows
                if "MESSAGE)" in text.partition(" VALUES ")[0]:
                    writes.entries += rows

        self._conn.set_trace_callback(trace)
        try:
            yield writes
        finally:
            self._conn.set_trace_callback(None)

    @contextlib.asynccontextmanager
    async def fail_commits(self, run_id: str | None = None) -> AsyncIterator[type[BaseException]]:
        """A trigger aborts the run upsert (of ``run_id`` only, if given), after the history rows went in."""
        when = "" if run_id is None else f"WHEN NEW.run_id = {_quote(run_id)} "
        action = f"SELECT RAISE(ABORT, {_quote(INJECTED_FAILURE)});"
        async with self._triggers("BEFORE", when, action):
            yield StoreError

    @contextlib.asynccontextmanager
    async def fail_at_commit(self) -> AsyncIterator[type[BaseException]]:
        """A trigger leaves a dangling deferred foreign key behind each run write: ``COMMIT`` refuses it."""
        conn = self._conn
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS repertory_probe_parent (id INTEGER PRIMARY KEY)")
        conn.execute(
            "CREATE TEMP TABLE IF NOT EXISTS repertory_probe_child "
            "(parent INTEGER REFERENCES repertory_probe_parent (id) DEFERRABLE INITIALLY DEFERRED)"
        )
        enforced = conn.execute("PRAGMA foreign_keys").fetchone()[0]
        conn.execute("PRAGMA foreign_keys = ON")
        try:
            async with self._triggers("AFTER", "", "INSERT INTO repertory_probe_child VALUES (-1);"):
                yield StoreError
        finally:
            conn.execute(f"PRAGMA foreign_keys = {'ON' if enforced else 'OFF'}")
            conn.execute("DROP TABLE IF EXISTS temp.repertory_probe_child")
            conn.execute("DROP TABLE IF EXISTS temp.repertory_probe_parent")

    async def overwrite_record(self, table: RecordTable, row_id: str, raw: str) -> None:
        """``UPDATE`` the row's JSON column on the writer connection (an unknown row is an ``AssertionError``)."""
        key, column = RECORD_COLUMNS[table]
        changed = self._conn.execute(f"UPDATE {table} SET {column} = ? WHERE {key} = ?", (raw, row_id)).rowcount
        assert changed == 1, f"no {table} row {row_id!r} to overwrite"

    async def reopen(self) -> SqliteSessionStore:
        """Open the same file again with the same settings; this probe then looks at the new store."""
        if self.store.path == ":memory:":
            raise ProbeUnsupported("an in-memory SQLite database does not outlive its connection")
        self.store = await SqliteSessionStore.open(
            self.store.path, durability=self.store.durability, group_commit=self.store.group_commit
        )
        return self.store

    @contextlib.asynccontextmanager
    async def _triggers(self, timing: str, when: str, action: str) -> AsyncIterator[None]:
        conn = self._conn
        for name, event in _TRIGGERS:
            conn.execute(f"CREATE TEMP TRIGGER {name} {timing} {event} ON main.runs {when}BEGIN {action} END")
        try:
            yield
        finally:
            for name, _ in _TRIGGERS:
                conn.execute(f"DROP TRIGGER IF EXISTS temp.{name}")


def _quote(text: str) -> str:
    """A SQL string literal (trigger bodies cannot take parameters)."""
    return "'" + text.replace("'", "''") + "'"
