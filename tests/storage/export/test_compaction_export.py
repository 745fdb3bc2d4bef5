"""The Parquet export of a compacted thread: every message a row in lineage order, summaries marked.

A compaction re-adds the messages it keeps after its summary, so their rows move one position on
between exports; the ``messages`` view must then hold exactly the thread's lineage (no stale row,
no duplicate), with ``boundary`` true on the summaries only, and ``tool_calls`` each call once.
"""

from __future__ import annotations

from pathlib import Path

from repertory import Session
from repertory.analytics import connect
from repertory.storage import TreeStore
from repertory.storage.export import export_parquet
from tests.runtime.compact_script import Conversation, compacting_agent, prompt


async def _lineage(store: TreeStore, thread_id: str) -> list[tuple[str, bool]]:
    thread = await store.load_thread(thread_id)
    assert thread is not None and thread.history_revision_id is not None
    history = await store.load_history(thread.history_revision_id)
    assert history is not None
    return [(m.text, m.boundary) for m in history.messages]


async def test_the_export_of_a_compacted_thread_marks_its_summaries(store: TreeStore, tmp_path: Path) -> None:
    sess = Session(store=store, agent=compacting_agent(Conversation()))
    out = tmp_path / "export"
    for start, end in ((0, 12), (12, 30)):  # an export between compactions, then after more
        for i in range(start, end):
            assert (await sess.start(prompt(i))).status == "done"
        await export_parquet(store, out)
        con = connect(out)
        rows = con.execute(
            "SELECT text, boundary FROM thread_messages(?) ORDER BY position", [sess.thread_id]
        ).fetchall()
        expected = await _lineage(store, sess.thread_id)
        assert [(text, bool(boundary)) for text, boundary in rows] == expected
        calls = con.execute("SELECT count(*), count(DISTINCT tool_call_id) FROM tool_calls").fetchone()
        assert calls == (end, end)  # one lookup per turn, each once, every one answered
        answered = con.execute("SELECT count(*) FROM tool_calls WHERE result IS NULL").fetchone()
        assert answered == (0,)
    assert sum(b for _, b in expected) >= 2
