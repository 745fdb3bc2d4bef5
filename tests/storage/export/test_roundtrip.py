"""Export a fleet and read it back: the export holds exactly the store's data, on every backend."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from repertory import Runtime
from repertory.analytics import connect
from repertory.storage import TreeStore
from repertory.storage.export import TABLES, export_parquet, read_watermark
from tests.storage.export.fleet import build_fleet
from tests.storage.export.helpers import message_view, store_counts, table_rows


async def test_export_holds_the_store_rows(runtime: Runtime, store: TreeStore, tmp_path: Path) -> None:
    fleet = await build_fleet(runtime)
    out = tmp_path / "export"
    report = await export_parquet(store, out)
    expected = await store_counts(store, fleet.sessions)
    con = connect(out)
    for table, count in expected.items():
        assert report.tables[table].rows == count, table
        assert con.sql(f"SELECT count(*) FROM {table}").fetchall() == [(count,)], table
    assert {r[0] for r in con.sql("SELECT session_id FROM sessions").fetchall()} == {h.id for h in fleet.sessions}
    runs = {r.run_id: r for r in await store.list_runs()}
    exported = con.sql("SELECT run_id, status, total_tokens, thread_id, error_type FROM runs").fetchall()
    assert {r[0]: (r[1], r[2], r[3]) for r in exported} == {
        k: (r.status, r.usage.total_tokens, r.thread_id) for k, r in runs.items()
    }
    assert [r[4] for r in exported if r[1] == "error"] == ["RuntimeError"]
    marks = {name: read_watermark(out, name) for name in TABLES}
    assert all(m is not None and m.generation == 1 for m in marks.values())


async def test_thread_messages_equal_load_history(runtime: Runtime, store: TreeStore, tmp_path: Path) -> None:
    fleet = await build_fleet(runtime)
    await export_parquet(store, tmp_path / "export")
    con = connect(tmp_path / "export")
    for h in fleet.sessions:
        thread = await store.load_thread(h.id)
        assert thread is not None
        rows = con.execute(
            "SELECT position, revision_id, entry_id, role, origin_kind, text, tool_names FROM thread_messages(?)",
            [h.id],
        ).fetchall()
        if thread.history_revision_id is None:
            assert rows == []
            continue
        history = await store.load_history(thread.history_revision_id)
        assert history is not None
        lineage = history.lineage()
        assert [r[0] for r in rows] == list(range(len(lineage)))
        assert [r[1] for r in rows] == [rev.id for rev in lineage]
        assert [r[2] for r in rows] == [rev.entry_id for rev in lineage]
        got = [{"role": r[3], "origin_kind": r[4], "text": r[5], "tool_names": r[6]} for r in rows]
        assert got == [message_view(m) for m in history.messages]


async def test_files_are_read_by_pyarrow_and_duckdb_alone(runtime: Runtime, store: TreeStore, tmp_path: Path) -> None:
    fleet = await build_fleet(runtime)
    out = tmp_path / "export"
    report = await export_parquet(store, out)
    for name in TABLES:
        rows = table_rows(out, name)  # checks the schema too
        assert len(rows) == report.tables[name].rows, name
        if rows:
            relation = duckdb.sql(f"SELECT count(*) FROM read_parquet('{out / name}/*.parquet')")
            assert relation is not None  # a SELECT always gives a relation
            count = relation.fetchall()
            assert count == [(len(rows),)], name
    entries = {r["entry_id"]: r for r in table_rows(out, "entries")}
    for h in fleet.sessions:
        thread = await store.load_thread(h.id)
        if thread is None or thread.history_revision_id is None:
            continue
        history = await store.load_history(thread.history_revision_id)
        assert history is not None
        for entry in history.entries:
            assert json.loads(entries[entry.id]["message"]) == entry.message.model_dump(mode="json")
            assert entries[entry.id]["created_at"] == entry.created_at


async def test_no_resume_token_is_ever_exported(runtime: Runtime, store: TreeStore, tmp_path: Path) -> None:
    fleet = await build_fleet(runtime)
    [(waiting, live)] = fleet.pending
    [run] = await store.list_runs(waiting.id)
    assert run.suspended_on is not None and run.suspended_on.token == live  # the store does hold one
    out = tmp_path / "export"
    await export_parquet(store, out)
    raw = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    text = "\n".join(json.dumps(table_rows(out, name), default=str) for name in TABLES)
    for token in fleet.tokens:
        assert token.encode() not in raw
        assert token not in text
    [(raw_state,)] = connect(out).execute("SELECT state FROM runs WHERE run_id = ?", [run.run_id]).fetchall()
    state = json.loads(raw_state)
    assert state["suspended_on"]["kind"] == "approval" and "token" not in state["suspended_on"]


async def test_tool_calls_approvals_and_failures(runtime: Runtime, store: TreeStore, tmp_path: Path) -> None:
    await build_fleet(runtime)
    await export_parquet(store, tmp_path / "export")
    con = connect(tmp_path / "export")
    decisions = con.sql(
        "SELECT approval_decision, is_error, result IS NULL, approval_wait_ms >= 0 FROM tool_calls "
        "WHERE tool_name = 'delete_record' ORDER BY approval_requested_at"
    ).fetchall()
    # Three triage runs asked; one approved, one rejected, one still waiting. The fork repeats none of them.
    assert decisions == [
        ("approved", False, False, True),
        ("rejected", True, False, True),
        ("pending", None, True, None),
    ]
    deciders = con.sql(
        "SELECT approval_decision, approval_decided_by FROM tool_calls "
        "WHERE tool_name = 'delete_record' ORDER BY approval_requested_at"
    ).fetchall()
    assert deciders == [("approved", "user"), ("rejected", "user"), ("pending", None)]  # the handles' principal
    failing = con.sql("SELECT args, result FROM tool_calls WHERE tool_name = 'flaky' AND is_error").fetchall()
    assert len(failing) == 3 and all("bad-t2" in a and "cannot process" in r for a, r in failing)
    assert con.sql("SELECT count(*) FROM tool_calls WHERE run_id IS NULL").fetchall() == [(0,)]
    assert con.sql("SELECT min(latency_ms) >= 0 FROM tool_calls").fetchall() == [(True,)]
    runs = {r.run_id for r in await store.list_runs()}
    assert {r[0] for r in con.sql("SELECT DISTINCT run_id FROM tool_calls").fetchall()} <= runs
    fork_rows = con.execute(
        "SELECT count(*) FROM tool_calls WHERE thread_id IN (SELECT session_id FROM sessions WHERE lineage_kind = ?)",
        ["forked"],
    ).fetchall()
    assert fork_rows == [(0,)]


async def test_reopened_store_continues_the_same_export(tmp_path: Path) -> None:
    from repertory.storage import SqliteSessionStore
    from tests.storage.export.fleet import agents

    path, out = tmp_path / "fleet.db", tmp_path / "export"
    async with await SqliteSessionStore.open(path) as store:
        async with await Runtime.start(store=store, agents=agents()) as rt:
            await build_fleet(rt)
        first = await export_parquet(store, out)
    async with await SqliteSessionStore.open(path) as again:
        second = await export_parquet(again, out)
    assert first.rows > 0 and second.rows == 0 and second.generation == 2
