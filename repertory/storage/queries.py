"""SQL shared by the SQL backends, written once with the driver's placeholder as a parameter."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["runs_query"]


def runs_query(
    thread_id: str | None, statuses: Sequence[str] | None, limit: int | None, mark: str, table: str = "runs"
) -> tuple[str, tuple[object, ...]]:
    """The ``list_runs`` query for either SQL backend (``mark`` is the driver's placeholder)."""
    where, params = [], []
    if thread_id is not None:
        where.append(f"thread_id = {mark}")
        params.append(thread_id)
    if statuses is not None:
        where.append(f"status IN ({', '.join(mark for _ in statuses) or 'NULL'})")
        params.extend(statuses)
    sql = f"SELECT state FROM {table}" + (" WHERE " + " AND ".join(where) if where else "")
    sql += " ORDER BY updated_at DESC, write_seq DESC"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return sql, tuple(params)
