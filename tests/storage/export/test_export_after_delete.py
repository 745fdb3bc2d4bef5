"""An export after ``delete_sessions`` still writes every row that comes after, and each row once.

SQLite gives a new row the rowid one above the table's largest, so deleting the newest rows (the
last session written) lowers that largest rowid, and the next rows reuse rowids an earlier export
already passed; the store records where each table fell back (``rowid_fallbacks``) and the export
resumes below it. The in-memory store numbers what it writes from a counter a deletion never moves
back. PostgreSQL's reader positions by transaction ids, which never go back. This was a bug
(found on 2026-12-02: the step after the deletion was missing from the export on SQLite and in
memory); these tests hold every backend to it.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from repertory import ModelMessage
from repertory.core.history import MessageHistory
from repertory.core.tree import SessionEvent, SessionRecord
from repertory.storage import TreeStore
from repertory.storage.export import export_parquet
from tests.records import commit, history_of


class _Sessions:
    """Sessions with one thread each, grown a message (and an event) at a time."""

    def __init__(self, store: TreeStore) -> None:
        self.store = store
        self.histories: dict[str, MessageHistory] = {}

    async def create(self, sid: str) -> None:
        await self.store.create_session(SessionRecord(session_id=sid, agent="x", root_id=sid))
        self.histories[sid] = history_of(f"{sid} 1")
        await commit(self.store, self.histories[sid], thread_id=sid, run_id=f"run-{sid}")
        await self.store.append_events([SessionEvent(session_id=sid, seq=1, type="note")])

    async def grow(self, sid: str) -> None:
        history = self.histories[sid]
        base = history.revision_id
        history.append(ModelMessage.user(f"{sid} {len(history.entries) + 1}"))
        await commit(self.store, history, thread_id=sid, run_id=f"run-{sid}", base=base)
        seq = await self.store.last_event_seq(sid) + 1
        await self.store.append_events([SessionEvent(session_id=sid, seq=seq, type="note")])


def _exported(out: Path) -> dict[str, list[object]]:
    def column(sql: str) -> list[object]:
        return [r[0] for r in duckdb.execute(sql).fetchall()]

    return {
        "revisions": column(f"SELECT revision_id FROM read_parquet('{out}/revisions/*.parquet')"),
        "entries": column(f"SELECT entry_id FROM read_parquet('{out}/entries/*.parquet')"),
        "events": column(f"SELECT session_id || ':' || seq FROM read_parquet('{out}/events/*.parquet')"),
    }


def _expected(sessions: _Sessions, alive: list[str], events: dict[str, int]) -> dict[str, set[object]]:
    histories = [sessions.histories[sid] for sid in alive]
    return {
        "revisions": {r.id for h in histories for r in h.revisions},
        "entries": {e.id for h in histories for e in h.entries},
        "events": {f"{sid}:{seq}" for sid in alive for seq in range(1, events[sid] + 1)},
    }


async def test_a_step_after_deleting_the_newest_session_is_exported(store: TreeStore, tmp_path: Path) -> None:
    out = tmp_path / "export"
    sessions = _Sessions(store)
    for sid in ("a", "b"):
        await sessions.create(sid)
    for sid in ("a", "b"):
        await sessions.grow(sid)
    await export_parquet(store, out)

    await store.delete_sessions(["b"])  # b wrote last: its rows were the newest
    await sessions.grow("a")
    await export_parquet(store, out)

    exported = _exported(out)
    head = sessions.histories["a"].head
    assert head is not None
    assert head.id in exported["revisions"] and head.entry_id in exported["entries"]
    assert "a:3" in exported["events"]
    deleted = sessions.histories["b"].head
    assert deleted is not None and deleted.id in exported["revisions"], "the export keeps what it archived"
    for table, ids in exported.items():
        assert len(ids) == len(set(ids)), f"{table}: a row exported twice"


async def test_deletions_between_two_exports_lose_nothing_and_repeat_nothing(store: TreeStore, tmp_path: Path) -> None:
    """Two deletions in one interval, each falling back further, with writes between and after them."""
    out = tmp_path / "export"
    sessions = _Sessions(store)
    for sid in ("a", "c", "d"):
        await sessions.create(sid)
    await export_parquet(store, out)

    await store.delete_sessions(["d"])  # the newest: the tables fall back to c's rows
    await sessions.grow("a")  # reuses d's rowids
    await store.delete_sessions(["a"])  # now a's new rows are the newest: they fall back again
    await sessions.grow("c")
    await export_parquet(store, out)
    await sessions.create("e")
    await sessions.grow("c")
    await export_parquet(store, out)  # a third export, positioned after the deletions, reads only what is new

    exported = _exported(out)
    for table, ids in exported.items():
        assert len(ids) == len(set(ids)), f"{table}: a row exported twice"
    wanted = _expected(sessions, ["c", "e"], {"c": 3, "e": 1})
    for table, expected in wanted.items():
        assert expected <= set(exported[table]), f"{table}: rows written after a deletion were not exported"
