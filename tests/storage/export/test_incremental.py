"""Later exports write only what changed; a crash mid-export is redone without duplicates or losses."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import repertory.storage.export._export as export_module
from repertory import Runtime
from repertory.analytics import connect
from repertory.storage import TreeStore
from repertory.storage.export import TABLES, export_parquet, read_watermark
from repertory.storage.export._files import PartWriter, Watermark, write_watermark
from tests.storage.export.fleet import build_fleet, more_work
from tests.storage.export.helpers import store_counts, table_rows, view_rows

ORDER = {
    "sessions": "session_id",
    "threads": "thread_id",
    "runs": "run_id",
    "entries": "entry_id",
    "revisions": "revision_id",
    "turns": "submission_id",
    "events": "session_id, seq",
    "messages": "thread_id, position",
    "tool_calls": "thread_id, call_entry_id, tool_call_id",
}


class Crash(Exception):
    """What the tests raise to stop an export where a crash would."""


def assert_same_views(out: Path, reference: Path) -> None:
    """Every view of ``out`` holds exactly the rows of ``reference`` (generations aside)."""
    con, ref = connect(out), connect(reference)
    for table, order in ORDER.items():
        assert view_rows(con, table, order) == view_rows(ref, table, order), table


def assert_no_duplicates(out: Path) -> None:
    """Append-only tables hold each row once across all part files."""
    for table in ("entries", "revisions", "events"):
        keys = [tuple(r[k] for k in TABLES[table].key) for r in table_rows(out, table)]
        assert len(keys) == len(set(keys)), table


async def test_second_export_writes_only_what_changed(runtime: Runtime, store: TreeStore, tmp_path: Path) -> None:
    fleet = await build_fleet(runtime)
    out = tmp_path / "export"
    first = await export_parquet(store, out)
    before = await store_counts(store, fleet.sessions)
    [(waiting, _)] = fleet.pending
    [suspended] = await store.list_runs(waiting.id)
    assert suspended.status == "suspended"
    await more_work(fleet)
    after = await store_counts(store, fleet.sessions)
    second = await export_parquet(store, out)
    for table in ("entries", "revisions", "events"):
        assert second.tables[table].rows == after[table] - before[table], table
    # The approved run (and its turn) changed, and the root got a new run and turn: two rows each.
    assert after["turns"] - before["turns"] == 1 and second.tables["turns"].rows == 2
    assert second.tables["runs"].rows == 2
    assert second.tables["sessions"].rows == 2  # the sessions whose turns ended (their updated_at moved)
    assert 0 < second.rows < first.rows
    con = connect(out)
    statuses = con.execute("SELECT status FROM runs WHERE run_id = ?", [suspended.run_id]).fetchall()
    assert statuses == [("done",)]  # the latest state, once
    versions = [r["status"] for r in table_rows(out, "runs") if r["run_id"] == suspended.run_id]
    assert sorted(versions) == ["done", "suspended"]  # both versions are in the files; the view keeps one
    decided = con.execute(
        "SELECT approval_decision, is_error FROM tool_calls WHERE thread_id = ? AND tool_name = 'delete_record'",
        [waiting.id],
    ).fetchall()
    assert decided == [("approved", False)]
    for table, count in after.items():
        assert con.sql(f"SELECT count(*) FROM {table}").fetchall() == [(count,)], table
    third = await export_parquet(store, out)
    assert {t: r.rows for t, r in third.tables.items()} == dict.fromkeys(TABLES, 0)
    assert third.generation == 3
    assert_no_duplicates(out)
    fresh = tmp_path / "fresh"
    await export_parquet(store, fresh)
    assert_same_views(out, fresh)


@pytest.mark.parametrize("landed", [0, 3, 7, 8])
async def test_crash_between_data_files_and_watermarks(
    runtime: Runtime, store: TreeStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, landed: int
) -> None:
    """Every data file of generation 2 is in place, but only ``landed`` of the nine watermarks were written."""
    fleet = await build_fleet(runtime)
    out = tmp_path / "export"
    await export_parquet(store, out)
    await more_work(fleet)
    real = write_watermark  # the function export_module calls, patched there below
    written: list[str] = []

    def crash_after(out_dir: Path, mark: Watermark) -> None:
        if len(written) == landed:
            raise Crash
        real(out_dir, mark)
        written.append(mark.table)

    monkeypatch.setattr(export_module, "write_watermark", crash_after)
    with pytest.raises(Crash):
        await export_parquet(store, out)
    monkeypatch.setattr(export_module, "write_watermark", real)
    marks = {name: read_watermark(out, name) for name in TABLES}
    assert sum(1 for m in marks.values() if m is not None and m.generation == 2) == landed
    # Until the re-run, readers see complete generations only.
    con = connect(out)
    assert_no_duplicates(out)
    assert con.sql("SELECT count(*) FROM (SELECT run_id FROM runs GROUP BY run_id HAVING count(*) > 1)").fetchall() == [
        (0,)
    ]
    await export_parquet(store, out)
    await export_parquet(store, out)  # and once more: nothing left to write, nothing written twice
    assert_no_duplicates(out)
    fresh = tmp_path / "fresh"
    await export_parquet(store, fresh)
    assert_same_views(out, fresh)


@pytest.mark.parametrize("fail_at", [1, 5, 9])
async def test_crash_while_writing_data_files(
    runtime: Runtime, store: TreeStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: int
) -> None:
    """The export dies while renaming part files into place; the re-run replaces what it left."""
    fleet = await build_fleet(runtime)
    out = tmp_path / "export"
    await export_parquet(store, out)
    await more_work(fleet)
    real = PartWriter.commit
    calls: list[int] = []

    def commit(self: PartWriter) -> Path | None:
        calls.append(1)
        result = real(self)
        if len(calls) == fail_at:
            raise Crash
        return result

    monkeypatch.setattr(PartWriter, "commit", commit)
    with pytest.raises(Crash):
        await export_parquet(store, out)
    monkeypatch.setattr(PartWriter, "commit", real)
    report = await export_parquet(store, out)
    assert report.generation == 2  # the crashed generation, written again under the same names
    assert_no_duplicates(out)
    fresh = tmp_path / "fresh"
    await export_parquet(store, fresh)
    assert_same_views(out, fresh)


async def test_leftovers_of_a_killed_export_are_invisible_then_removed(
    runtime: Runtime, store: TreeStore, tmp_path: Path
) -> None:
    await build_fleet(runtime)
    out = tmp_path / "export"
    await export_parquet(store, out)
    # What a kill -9 mid-export leaves: a temporary file and a renamed part of an unfinished generation.
    entries = out / "entries"
    (entries / ".part-00000002.parquet.tmp").write_bytes(b"half a file")
    (entries / "part-00000002.parquet").write_bytes((entries / "part-00000001.parquet").read_bytes())
    before = connect(out).sql("SELECT count(*) FROM entries").fetchall()
    assert before == [(len(table_rows(out, "entries")) // 2,)]
    report = await export_parquet(store, out)
    assert report.tables["entries"].rows == 0
    assert sorted(p.name for p in entries.iterdir()) == ["_watermark.json", "part-00000001.parquet"]
    assert connect(out).sql("SELECT count(*) FROM entries").fetchall() == before


async def test_export_while_sessions_run(runtime: Runtime, store: TreeStore, tmp_path: Path) -> None:
    """Exports taken while turns commit miss nothing: a last export afterwards equals a fresh one."""
    fleet = await build_fleet(runtime)
    out = tmp_path / "export"

    async def chatter() -> None:
        for i in range(12):
            await fleet.roots[i % 2].run(f"chat number {i}")

    busy = asyncio.create_task(chatter())
    exports = 0
    while not busy.done() or exports < 2:
        await export_parquet(store, out)
        exports += 1
    await busy
    await export_parquet(store, out)
    assert_no_duplicates(out)
    fresh = tmp_path / "fresh"
    await export_parquet(store, fresh)
    assert_same_views(out, fresh)
    con = connect(out)
    for root in fleet.roots:
        thread = await store.load_thread(root.id)
        assert thread is not None and thread.history_revision_id is not None
        history = await store.load_history(thread.history_revision_id)
        assert history is not None
        got = con.execute("SELECT revision_id FROM thread_messages(?)", [root.id]).fetchall()
        assert [r[0] for r in got] == [rev.id for rev in history.lineage()]
