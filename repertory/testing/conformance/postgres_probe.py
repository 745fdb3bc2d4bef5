"""``PostgresProbe``: the ``StoreProbe`` of ``PostgresSessionStore``, on a connection of its own.

The probe connects with the store's ``reopen_url`` and looks at the ``repertory`` schema directly.
Writes are counted by ``BEFORE INSERT`` row triggers on the history tables, which fire for every
row offered, also the ones ``ON CONFLICT DO NOTHING`` then skips; each bumps a sequence, which is
not rolled back with a failed transaction. Failures are triggers on ``runs``: the commit function
writes the history rows before the run row, so a trigger there fails a commit halfway; a deferred
constraint trigger fails it at ``COMMIT``. Every object the probe creates is named ``probe_*`` and
dropped when its block exits.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import psycopg
from psycopg import sql as pgsql

from repertory.errors import StoreError
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.testing.conformance.probe import INJECTED_FAILURE, RECORD_COLUMNS, HistoryWrites, RecordTable

__all__ = ["PostgresProbe"]

_COUNT_WRITES = """
CREATE SEQUENCE repertory.probe_entry_writes;
CREATE SEQUENCE repertory.probe_revision_writes;
CREATE FUNCTION repertory.probe_count_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM nextval(TG_ARGV[0]::regclass); RETURN NEW; END $$;
CREATE TRIGGER probe_count_entries BEFORE INSERT ON repertory.history_entries
FOR EACH ROW EXECUTE FUNCTION repertory.probe_count_write('repertory.probe_entry_writes');
CREATE TRIGGER probe_count_revisions BEFORE INSERT ON repertory.history_revisions
FOR EACH ROW EXECUTE FUNCTION repertory.probe_count_write('repertory.probe_revision_writes');
"""

_READ_WRITES = """
SELECT (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM repertory.probe_entry_writes),
       (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM repertory.probe_revision_writes)
"""

_UNCOUNT_WRITES = """
DROP TRIGGER IF EXISTS probe_count_entries ON repertory.history_entries;
DROP TRIGGER IF EXISTS probe_count_revisions ON repertory.history_revisions;
DROP FUNCTION IF EXISTS repertory.probe_count_write();
DROP SEQUENCE IF EXISTS repertory.probe_entry_writes;
DROP SEQUENCE IF EXISTS repertory.probe_revision_writes;
"""

# TG_ARGV: the message, then optionally the one run id to fail (none: every run).
_FAIL_RUNS = """
CREATE FUNCTION repertory.probe_fail_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_NARGS = 1 OR NEW.run_id = TG_ARGV[1] THEN RAISE EXCEPTION '%', TG_ARGV[0]; END IF;
    RETURN NEW;
END $$;
"""

_UNFAIL_RUNS = """
DROP TRIGGER IF EXISTS probe_fail_run ON repertory.runs;
DROP FUNCTION IF EXISTS repertory.probe_fail_run();
"""


class PostgresProbe:
    """Looks under one ``PostgresSessionStore``."""

    def __init__(self, store: PostgresSessionStore) -> None:
        self.store = store

    async def count_history_rows(self) -> tuple[int, int]:
        """Rows of ``repertory.history_entries`` and ``repertory.history_revisions``."""
        row = await self._fetch(
            "SELECT (SELECT count(*) FROM repertory.history_entries), "
            "(SELECT count(*) FROM repertory.history_revisions)"
        )
        return int(row[0]), int(row[1])

    async def holds_history_entry(self, entry_id: str) -> bool:
        """Whether ``repertory.history_entries`` has the row."""
        row = await self._fetch("SELECT count(*) FROM repertory.history_entries WHERE id = %s", (entry_id,))
        return bool(row[0])

    @contextlib.asynccontextmanager
    async def count_history_writes(self) -> AsyncIterator[HistoryWrites]:
        """Count history rows offered to ``INSERT`` inside the block (skipped duplicates included)."""
        writes = HistoryWrites()
        await self._execute(_UNCOUNT_WRITES + _COUNT_WRITES)
        try:
            yield writes
            row = await self._fetch(_READ_WRITES)
            writes.entries, writes.revisions = int(row[0]), int(row[1])
        finally:
            await self._execute(_UNCOUNT_WRITES)

    @contextlib.asynccontextmanager
    async def fail_commits(self, run_id: str | None = None) -> AsyncIterator[type[BaseException]]:
        """A trigger raises on the run row's write (of ``run_id`` only, if given)."""
        args = ", ".join(_quote(a) for a in (INJECTED_FAILURE, *(() if run_id is None else (run_id,))))
        await self._execute(
            _UNFAIL_RUNS
            + _FAIL_RUNS
            + "CREATE TRIGGER probe_fail_run BEFORE INSERT OR UPDATE ON repertory.runs "
            + f"FOR EACH ROW EXECUTE FUNCTION repertory.probe_fail_run({args});"
        )
        try:
            yield StoreError
        finally:
            await self._execute(_UNFAIL_RUNS)

    @contextlib.asynccontextmanager
    async def fail_at_commit(self) -> AsyncIterator[type[BaseException]]:
        """A deferred constraint trigger on ``runs`` raises when the transaction commits."""
        undo = (
            "DROP TRIGGER IF EXISTS probe_fail_at_commit ON repertory.runs;"
            "DROP FUNCTION IF EXISTS repertory.probe_fail_at_commit();"
        )
        await self._execute(
            undo
            + "CREATE FUNCTION repertory.probe_fail_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$ "
            + f"BEGIN RAISE EXCEPTION {_quote(INJECTED_FAILURE + ' at commit')}; END $$;"
            + "CREATE CONSTRAINT TRIGGER probe_fail_at_commit AFTER INSERT OR UPDATE ON repertory.runs "
            + "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION repertory.probe_fail_at_commit();"
        )
        try:
            yield StoreError
        finally:
            await self._execute(undo)

    async def overwrite_record(self, table: RecordTable, row_id: str, raw: str) -> None:
        """``UPDATE`` the row's JSON column (``text``, so any text goes) on a connection of the probe's own."""
        key, column = RECORD_COLUMNS[table]
        async with await psycopg.AsyncConnection.connect(self.store.reopen_url, autocommit=True) as conn:
            cur = await conn.execute(
                pgsql.SQL("UPDATE repertory.{} SET {} = %s WHERE {} = %s").format(
                    pgsql.Identifier(table), pgsql.Identifier(column), pgsql.Identifier(key)
                ),
                (raw, row_id),
            )
            assert cur.rowcount == 1, f"no {table} row {row_id!r} to overwrite"

    async def reopen(self) -> PostgresSessionStore:
        """Open the same database again with the same group-commit setting; this probe then looks at it."""
        self.store = await PostgresSessionStore.open(self.store.reopen_url, group_commit=self.store.group_commit)
        return self.store

    async def _execute(self, sql: str) -> None:
        async with await psycopg.AsyncConnection.connect(self.store.reopen_url, autocommit=True) as conn:
            await conn.execute(sql)

    async def _fetch(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...]:
        async with await psycopg.AsyncConnection.connect(self.store.reopen_url, autocommit=True) as conn:
            cur = await conn.execute(sql, params)
            row = await cur.fetchone()
        assert row is not None
        return tuple(row)


def _quote(text: str) -> str:
    """A SQL string literal (DDL takes no parameters)."""
    return "'" + text.replace("'", "''") + "'"
