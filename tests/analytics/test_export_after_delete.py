"""An export after ``delete_sessions`` still writes what comes after: a known gap on SQLite and in memory.

SQLite gives a new row the rowid one above the table's largest, so deleting the newest rows (the
last session written) lowers that largest rowid, and the next rows reuse rowids an earlier export
already passed: an incremental export positioned by rowid then skips them. The in-memory reader's
positions are list offsets, which any deletion shifts. PostgreSQL's reader positions by
transaction ids, which never go back, and passes. The two failing backends are marked
``xfail(strict=True)``: this is a bug found on 2026-12-02, not a behaviour, and the test starts
failing (so the mark must go) the day it is fixed. On SQLite ``AUTOINCREMENT`` would fix it at a
page written per commit; a cheaper fix is to carry in the export's position the rowid a deletion
fell back to (kept in ``repertory_meta`` by ``delete_sessions``).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from repertory import InMemorySessionStore, ModelMessage
from repertory.core.tree import SessionRecord
from repertory.storage import SqliteSessionStore, TreeStore
from repertory.storage.export import export_parquet
from tests.records import commit, history_of


async def test_a_step_after_deleting_the_newest_session_is_exported(
    store: TreeStore, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if isinstance(store, SqliteSessionStore | InMemorySessionStore):
        request.applymarker(
            pytest.mark.xfail(strict=True, reason="positions that a deletion moves back (see the module docstring)")
        )
    out = tmp_path / "export"
    histories = {}
    for sid in ("a", "b"):
        await store.create_session(SessionRecord(session_id=sid, agent="x", root_id=sid))
        histories[sid] = history_of(f"{sid} first")
        await commit(store, histories[sid], thread_id=sid, run_id=f"run-{sid}")
    for sid, history in histories.items():
        base = history.revision_id
        history.append(ModelMessage.user(f"{sid} second"))
        await commit(store, history, thread_id=sid, run_id=f"run-{sid}", base=base)
    await export_parquet(store, out)

    await store.delete_sessions(["b"])  # b wrote last: its rows were the newest
    a = histories["a"]
    base = a.revision_id
    a.append(ModelMessage.user("a third"))
    await commit(store, a, thread_id="a", run_id="run-a", base=base)
    await export_parquet(store, out)

    revisions = {
        r[0] for r in duckdb.execute(f"SELECT revision_id FROM read_parquet('{out}/revisions/*.parquet')").fetchall()
    }
    entries = {r[0] for r in duckdb.execute(f"SELECT entry_id FROM read_parquet('{out}/entries/*.parquet')").fetchall()}
    head = a.head
    assert head is not None
    assert head.id in revisions and head.entry_id in entries
