"""The PostgreSQL side of the million benchmark: bulk creation by COPY, relation sizes, WAL position, server CPU.

Bulk creation writes the two rows ``PgTreeTables.create_session`` writes for a root session, exactly
as it writes them: ``repertory.sessions (session_id, parent_id, created_at, record)`` with the
record's ``model_dump_json()`` (``ord`` left to its sequence) and ``repertory.threads (thread_id,
head, created_at, updated_at)`` with no head. The store has no batch creation (``LocalHost.
create_sessions`` is one transaction per session), so the rows go through ``COPY``, a batch per
transaction, both tables in the same one, so a session never exists without its thread.
"""

from __future__ import annotations

import os
import time
from typing import Any

import psycopg

from benchmarks.million.report import Creation, Relation, Sizes
from repertory.core.ids import now_ms
from repertory.core.tree import NewSession

__all__ = ["BATCH", "bulk_create", "creation", "postgres_cpu_seconds", "sizes", "wal_bytes", "wal_lsn"]

BATCH = 50_000

_RELATIONS = """
SELECT c.relname, c.relkind,
       CASE WHEN c.relkind = 'r' THEN pg_total_relation_size(c.oid) ELSE pg_relation_size(c.oid) END
FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = 'repertory' AND c.relkind IN ('r', 'i')
"""


async def wal_lsn(conn: psycopg.AsyncConnection[Any]) -> str:
    """The server's current WAL insert position (``pg_current_wal_lsn``)."""
    cur = await conn.execute("SELECT pg_current_wal_lsn()::text")
    row = await cur.fetchone()
    assert row is not None
    return str(row[0])


async def wal_bytes(conn: psycopg.AsyncConnection[Any], since: str) -> int:
    """WAL bytes written since the position ``since``."""
    cur = await conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)::bigint", (since,))
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


def postgres_cpu_seconds(postmaster: int) -> float:
    """User + system CPU of the server so far: the postmaster, its live children, and children it reaped.

    A backend that exits hands its CPU to the postmaster's ``cutime``/``cstime`` once reaped, so
    the sum only grows (pooled connections stay open anyway).
    """
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        pid, ppid = int(entry), int(fields[1])
        if pid == postmaster:
            total += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
        elif ppid == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / tick


async def bulk_create(conninfo: str, count: int, agent: str) -> tuple[float, float, int]:
    """COPY ``count`` root sessions for ``agent``; (seconds building records, seconds in COPY, WAL bytes)."""
    build = copy = 0.0
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        start = await wal_lsn(conn)
        for first in range(0, count, BATCH):
            t0 = time.perf_counter()
            rows = []
            for _ in range(min(BATCH, count - first)):
                record = NewSession(agent=agent).record(now_ms())
                rows.append((record.session_id, record.created_at, record.model_dump_json()))
            t1 = time.perf_counter()
            async with conn.transaction(), conn.cursor() as cur:
                async with cur.copy(
                    "COPY repertory.sessions (session_id, parent_id, created_at, record) FROM STDIN"
                ) as out:
                    for sid, at, text in rows:
                        await out.write_row((sid, None, at, text))
                async with cur.copy(
                    "COPY repertory.threads (thread_id, head, created_at, updated_at) FROM STDIN"
                ) as out:
                    for sid, at, _ in rows:
                        await out.write_row((sid, None, at, at))
            build += t1 - t0
            copy += time.perf_counter() - t1
        return build, copy, await wal_bytes(conn, start)


async def creation(conninfo: str, count: int, agent: str, api: tuple[int, float]) -> Creation:
    """The bulk creation timed, with the API sample (``api``: sessions, seconds) beside it."""
    build, copy, wal = await bulk_create(conninfo, count, agent)
    seconds = build + copy
    return Creation(
        how="COPY into repertory.sessions and repertory.threads, rows as PgTreeTables.create_session writes them, "
        f"{BATCH:,} per transaction",
        sessions=count,
        seconds=round(seconds, 2),
        per_second=round(count / seconds, 1),
        build_seconds=round(build, 2),
        copy_seconds=round(copy, 2),
        wal_bytes=wal,
        wal_bytes_per_session=round(wal / count, 1),
        api_sessions=api[0],
        api_seconds=round(api[1], 2),
        api_per_second=round(api[0] / api[1], 1),
    )


async def sizes(conninfo: str) -> Sizes:
    """Every table (with its indexes and TOAST) and index of the schema, per session in the database."""
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        cur = await conn.execute("SELECT count(*) FROM repertory.sessions")
        n = int((await cur.fetchone() or (0,))[0])
        cur = await conn.execute("SELECT count(DISTINCT thread_id) FROM repertory.runs")
        turned = int((await cur.fetchone() or (0,))[0])
        cur = await conn.execute(_RELATIONS)
        rows = await cur.fetchall()
        cur = await conn.execute("SELECT pg_database_size(current_database())")
        db = int((await cur.fetchone() or (0,))[0])
    relations = [
        Relation(name=name, kind="table" if kind == "r" else "index", bytes=int(size),
                 bytes_per_session=round(int(size) / max(1, n), 1))
        for name, kind, size in rows
    ]  # fmt: skip
    tables = sum(r.bytes for r in relations if r.kind == "table")
    return Sizes(sessions=n, sessions_with_a_turn=turned, relations=relations, tables_bytes=tables, database_bytes=db)
