"""SQL shared by the SQL backends, written once with the driver's placeholder as a parameter."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["runs_query"]


def runs_query(
    thread_id: str | None, statuses: Sequence[str] | None, limit: int | None, mark: str, table: str = "runs"
) -> tuple[str, tuple[object, ...]]:
    """The ``list_runs`` query for either SQL backend (``mark``: the driver's placeholder); rows ``(run_id, state)``."""
    where, params = [], []
    if thread_id is not None:
        where.append(f"thread_id = {mark}")
        params.append(thread_id)
    if statuses is not None:
        where.append(f"status IN ({', '.join(mark for _ in statuses) or 'NULL'})")
        params.extend(statuses)
    sql = f"SELECT run_id, state FROM {table}" + (" WHERE " + " AND ".join(where) if where else "")
    sql += " ORDER BY updated_at DESC, write_seq DESC"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return sql, tuple(params)


# -- the session listing (``TreeStore.page_sessions`` / ``session_counts``) ---------------------------

__all__ += ["SqlDialect", "session_counts_query", "session_page_query"]


class SqlDialect:
    """What differs between the SQL backends in the session listing: placeholder, names, JSON access."""

    def __init__(self, *, mark: str, prefix: str, order: str, field: str, find: str) -> None:
        self.mark = mark  # the driver's placeholder
        self.prefix = prefix  # "" or "repertory."
        self.order = order  # the column that orders sessions by creation: "rowid" or "ord"
        self.field = field  # a format string reading a top-level string field of the record: {col}, {key}
        self.find = find  # the function giving a substring's 1-based position (0: absent): instr, strpos

    def json(self, column: str, key: str) -> str:
        """The text of ``record``'s top-level field ``key``."""
        return self.field.format(col=column, key=key)


def _status_sets(d: SqlDialect) -> tuple[str, str]:
    """Sub-selects: ids of sessions with an open turn, and ``(thread_id, status)`` of each thread's latest run."""
    p = d.prefix
    busy = f"SELECT t.session_id FROM {p}turns t WHERE t.status IN ('queued', 'running')"
    # Only suspended and error runs can make a session anything but idle; each counts only while it
    # is its thread's latest run (a later run, of any status, supersedes it). The partial index on
    # those two statuses keeps this proportional to them, not to every run ever made.
    latest = f"SELECT r.thread_id, r.status FROM {p}runs r WHERE r.status IN ('suspended', 'error') AND {_latest(d)}"
    return busy, latest


def _latest(d: SqlDialect) -> str:
    """``r`` is its thread's latest run: no run of the thread was written after it."""
    return (
        f"NOT EXISTS (SELECT 1 FROM {d.prefix}runs r2 WHERE r2.thread_id = r.thread_id AND "
        "(r2.updated_at > r.updated_at OR (r2.updated_at = r.updated_at AND r2.write_seq > r.write_seq)))"
    )


def session_page_query(
    d: SqlDialect,
    *,
    before: str | None,
    limit: int,
    roots_only: bool,
    agent: str | None,
    status: str | None,
    search: str | None,
    owner: str | None = None,
) -> tuple[str, tuple[object, ...]]:
    """One keyset page of sessions, newest first: the rows before the cursor's, never an OFFSET.

    Each row is ``(session_id, record)``: the id names a row whose record cannot be read back.
    """
    m, p, o = d.mark, d.prefix, d.order
    where: list[str] = []
    params: list[object] = []
    if before is not None:
        where.append(f"s.{o} < (SELECT b.{o} FROM {p}sessions b WHERE b.session_id = {m})")
        params.append(before)
    if roots_only:
        where.append("s.parent_id IS NULL")
    if agent is not None:
        where.append(f"{d.json('s.record', 'agent')} = {m}")
        params.append(agent)
    if owner is not None:
        where.append(f"s.owner = {m}")  # the owner column and its index (schema version 10)
        params.append(owner)
    if search:
        needle = search.lower()
        title = f"{d.find}(lower(COALESCE({d.json('s.record', 'title')}, '')), {m}) > 0"
        marks = 2
        if not any(c in needle for c in '"\\') and needle.isprintable():
            # The record's JSON text holds such a needle verbatim wherever the title does: a plain
            # substring test first spares parsing the JSON of nearly every row (5x on PostgreSQL).
            title = f"({d.find}(lower(s.record), {m}) > 0 AND {title})"
            marks = 3
        where.append(f"(substr(lower(s.session_id), 1, {len(needle)}) = {m} OR {title})")
        params.extend([needle] * marks)  # the same value at every placeholder
    if status is not None:
        busy, latest = _status_sets(d)
        if status == "running":
            where.append(f"s.session_id IN ({busy})")
        elif status in ("suspended", "error"):
            where.append(f"s.session_id IN (SELECT thread_id FROM ({latest}) l WHERE l.status = {m})")
            where.append(f"s.session_id NOT IN ({busy})")
            params.append(status)
        else:  # idle
            where.append(f"s.session_id NOT IN ({busy})")
            where.append(f"s.session_id NOT IN (SELECT thread_id FROM ({latest}) l)")
    sql = f"SELECT s.session_id, s.record FROM {p}sessions s"
    sql += (" WHERE " + " AND ".join(where) if where else "") + f" ORDER BY s.{o} DESC LIMIT {int(limit)}"
    return sql, tuple(params)


def session_counts_query(d: SqlDialect, owner: str | None = None) -> tuple[str, tuple[object, ...]]:
    """Sessions running, suspended and in error (one row, three columns), by the rule of the page query.

    With ``owner``, only that owner's sessions count (each candidate's session row is read by key).
    """
    p = d.prefix
    busy, latest = _status_sets(d)
    mine = f" AND s.owner = {d.mark}" if owner is not None else ""
    per = (owner,) if owner is not None else ()

    def at_rest(status: str) -> str:
        return (
            f"SELECT COUNT(*) FROM ({latest}) l WHERE l.status = '{status}' AND l.thread_id NOT IN ({busy}) "
            f"AND EXISTS (SELECT 1 FROM {p}sessions s WHERE s.session_id = l.thread_id{mine})"
        )

    running = f"SELECT COUNT(DISTINCT b.session_id) FROM ({busy}) b"
    if owner is not None:
        running += f" WHERE EXISTS (SELECT 1 FROM {p}sessions s WHERE s.session_id = b.session_id{mine})"
    sql = f"SELECT ({running}), ({at_rest('suspended')}), ({at_rest('error')})"
    return sql, per * 3


def owner_counts_query(d: SqlDialect, owner: str) -> tuple[str, tuple[object, ...]]:
    """``session_counts_query``'s counts for one owner, read from that owner's sessions (the owner index).

    The general query walks every resting run and keeps the owner's; this one walks the owner's
    sessions and looks up each one's runs, so it costs in proportion to the owner's sessions. A
    store picks it for an owner with few sessions (SQLite's planner, without statistics, cannot).
    """
    p, m = d.prefix, d.mark
    busy, _ = _status_sets(d)

    def at_rest(status: str) -> str:
        return (
            f"SELECT COUNT(*) FROM {p}sessions s JOIN {p}runs r ON r.thread_id = s.session_id "
            f"WHERE s.owner = {m} AND r.status = '{status}' AND {_latest(d)} AND s.session_id NOT IN ({busy})"
        )

    running = (
        f"SELECT COUNT(DISTINCT b.session_id) FROM ({busy}) b JOIN {p}sessions s ON s.session_id = b.session_id "
        f"WHERE s.owner = {m}"
    )
    return f"SELECT ({running}), ({at_rest('suspended')}), ({at_rest('error')})", (owner,) * 3
