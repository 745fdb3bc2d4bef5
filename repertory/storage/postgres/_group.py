"""Group commit for ``PostgresSessionStore``: concurrent ``commit_session`` calls in one round trip.

A commit is already one call of ``repertory_commit`` (see ``_pg_schema``). Under group commit the
calls queued while earlier batches are in flight go to the server together, as one call of
``repertory_commit_batch``: one transaction, one round trip and one commit record for the lot, each
commit in its own exception block (a savepoint), so a commit whose guard fails (``RP001``/``RP002``)
or whose statements fail is rolled back alone and its caller gets its own error, mapped exactly as
a lone commit's. A lone commit is the plain ``repertory_commit`` call. The statement runs in
autocommit, so it returns only once the batch's transaction committed: an acknowledged commit is a
durable one, as without group commit. A batch whose commits carry spend (``core.budget``) adds
it in the same statement (``repertory_spend`` over the batch's outcomes: the members that landed
add theirs); a batch without spend sends the statement it always did.

A few batches may be in flight at once (``MAX_INFLIGHT``, each on its own pooled connection), so
a handful of concurrent sessions is not serialised behind one round trip. A batch holds at most
``MAX_BATCH`` commits: each member's savepoint is a subtransaction with an xid of its own, and past
64 of them in one transaction (``PGPROC_MAX_CACHED_SUBXIDS``) every other session's snapshot
"overflows" and must look subtransactions up in ``pg_subtrans``, which slows the whole server.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from psycopg_pool import AsyncConnectionPool

from repertory.errors import StoreError
from repertory.storage.group_commit import Failed, GroupCommit
from repertory.storage.history_cache import DEFAULT_HISTORY_CACHE_BYTES
from repertory.storage.postgres._budget_tables import SPEND_ARRAYS, SpendParams, lone_spend_sql, spend_arrays
from repertory.storage.postgres.connection import PgBase, error_for, redact

__all__ = ["COMMIT_SQL", "MAX_BATCH", "MAX_INFLIGHT", "CommitParams", "PgCommitWriter", "batch_params"]

CommitParams = tuple[Any, ...]
"""The 24 arguments of one ``repertory_commit`` call, in the function's order."""

MAX_INFLIGHT = 4
MAX_BATCH = 64  # PostgreSQL caches 64 subtransaction xids per backend; more overflow every snapshot

COMMIT_SQL = "SELECT repertory.repertory_commit(" + ", ".join(["%s"] * 24) + ")"

_SCALARS = 11  # thread .. redeem token: one value per commit
_FLAT = 13  # entries (3), revisions (5), events (5): a list per commit
_TYPES = (
    "text", "text", "text", "bigint", "bigint", "bigint", "text", "text", "text", "text", "text",
    "integer", "integer", "integer",
    "text", "bigint", "text",
    "text", "text", "text", "integer", "bigint",
    "bigint", "text", "text", "bigint", "text",
)  # fmt: skip
_BATCH_SQL = "SELECT repertory.repertory_commit_batch(" + ", ".join(f"%s::{t}[]" for t in _TYPES) + ")"
_COMMIT_SPEND_SQL = lone_spend_sql(COMMIT_SQL)
_BATCH_SPEND_SQL = f"WITH c AS ({_BATCH_SQL} AS o) SELECT c.o, repertory.repertory_spend(c.o, {SPEND_ARRAYS}) FROM c"
_Member = tuple[CommitParams, SpendParams | None]


def batch_params(batch: Sequence[CommitParams]) -> list[list[Any]]:
    """The arguments of ``repertory_commit_batch``: a column per scalar, counts, then flattened lists."""
    columns: list[list[Any]] = [[m[k] for m in batch] for k in range(_SCALARS)]
    columns.append([len(m[11]) for m in batch])  # entries
    columns.append([len(m[14]) for m in batch])  # revisions
    columns.append([len(m[19]) for m in batch])  # events
    for k in range(_SCALARS, _SCALARS + _FLAT):
        columns.append([value for m in batch for value in m[k]])
    return columns


class PgCommitWriter(PgBase):
    """``commit_session``'s writes: straight to the pool, or through group commit (the default)."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        url: str,
        password: str | None,
        group_commit: bool = True,
        history_cache_bytes: int = DEFAULT_HISTORY_CACHE_BYTES,
    ) -> None:
        super().__init__(pool, url, password, history_cache_bytes)
        self.group_commit = group_commit
        self._commits: GroupCommit[_Member, None] | None = (
            GroupCommit(self._flush, max_batch=MAX_BATCH, max_inflight=MAX_INFLIGHT) if group_commit else None
        )
        self._writers = [] if self._commits is None else [self._commits]

    @property
    def group_commit_counts(self) -> tuple[int, int] | None:
        """(batches, commits in them) sent through group commit so far; ``None`` with it off.

        Commits per batch is how far concurrent commits coalesced (``benchmarks.group_commit`` reads it).
        """
        return None if self._commits is None else (self._commits.batches, self._commits.members)

    async def _write_commit(self, params: CommitParams, spend: SpendParams | None = None) -> None:
        """Write one commit and its spend; returns once durable, raises its own ``CommitConflict``/``StoreError``."""
        if self._closed:
            raise StoreError("store is closed")
        if self._commits is None:
            await self._commit_one(params, spend)
        else:
            await self._commits.submit((params, spend))

    async def _commit_one(self, params: CommitParams, spend: SpendParams | None) -> None:
        async with self.connection("commit_session") as conn:
            if spend is None:
                await conn.execute(COMMIT_SQL, params)
            else:
                await conn.execute(_COMMIT_SPEND_SQL, (*params, *spend_arrays([spend])))

    async def _flush(self, batch: Sequence[_Member]) -> list[Failed | None]:
        if len(batch) == 1:
            try:
                await self._commit_one(*batch[0])
            except StoreError as exc:
                return [Failed(exc)]
            return [None]
        values = batch_params([params for params, _ in batch])
        spends = [spend for _, spend in batch]
        sql = _BATCH_SQL
        if any(spend is not None for spend in spends):
            sql = _BATCH_SPEND_SQL
            values += spend_arrays(spends)
        try:
            async with self.connection("commit_session") as conn:
                cur = await conn.execute(sql, values)
                row = await cur.fetchone()
        except StoreError as exc:  # the batch as a whole failed (connection lost, COMMIT failed)
            return [Failed(copy.copy(exc)) for _ in batch]
        if row is None or len(row[0]) != len(batch):
            raise StoreError(f"postgres: repertory_commit_batch returned {row!r} for {len(batch)} commits")
        return [None if outcome is None else Failed(self._member_error(outcome)) for outcome in row[0]]

    def _member_error(self, outcome: str) -> StoreError:
        sqlstate, _, message = outcome.partition(" ")
        return error_for("commit_session", sqlstate, redact(message, self._password))
