"""The table macros over a tree built by hand: ``session_tree``, ``tree_usage``, ``thread_messages``."""

from __future__ import annotations

from pathlib import Path

from repertory import MessageHistory, ModelMessage, RunState, TextPart, ThreadState, Usage
from repertory.analytics import connect
from repertory.core.tree import Lineage, SessionRecord
from repertory.storage import TreeStore
from repertory.storage.export import export_parquet


async def _session(
    store: TreeStore, sid: str, root: str, kind: str = "root", parent: str | None = None, at: int = 1_000
) -> None:
    head = None
    if kind == "forked":
        assert parent is not None
        thread = await store.load_thread(parent)
        head = None if thread is None else thread.history_revision_id
    lineage = Lineage(kind=kind, parent_id=parent, forked_at_revision_id=head)
    record = SessionRecord(session_id=sid, agent="a", lineage=lineage, root_id=root, title=sid, created_at=at,
                           updated_at=at)  # fmt: skip
    await store.create_session(record, head=head)


async def _run(
    store: TreeStore,
    sid: str,
    texts: list[str],
    tokens: tuple[int, int],
    cost: float | None,
    cache: tuple[int, int] = (0, 0),
) -> None:
    thread = await store.load_thread(sid)
    assert thread is not None
    base = thread.history_revision_id
    loaded = None if base is None else await store.load_history(base)
    history = MessageHistory() if loaded is None else loaded
    for i, text in enumerate(texts):
        # Each reply names the model that wrote it: the session's model letter, as a fleet of models would.
        reply = ModelMessage(role="assistant", parts=[TextPart(text=text)], model=f"model-{sid}")
        history.append(ModelMessage.user(text) if i % 2 == 0 else reply)
    usage = Usage(input_tokens=tokens[0], output_tokens=tokens[1], total_tokens=sum(tokens), requests=1,
                  cache_read_tokens=cache[0], cache_write_tokens=cache[1])  # fmt: skip
    run = RunState(run_id=f"run-{sid}-{len(texts)}-{tokens[0]}", thread_id=sid, status="done", usage=usage,
                   cost=cost, history_revision_id=history.revision_id)  # fmt: skip
    head = ThreadState(thread_id=sid, history_revision_id=history.revision_id, created_at=thread.created_at)
    await store.commit_session(run=run, thread=head, history=history, base_revision_id=base)


async def _tree(store: TreeStore) -> None:
    """R -> A (spawned) -> B (spawned); R -> F (forked) -> G (forked); and an unrelated root U."""
    await _session(store, "R", "R")
    await _run(store, "R", ["r1", "r2"], (100, 10), 0.5)
    await _session(store, "A", "R", "spawned", "R", at=1_001)
    await _run(store, "A", ["a1", "a2"], (20, 2), None)
    await _session(store, "F", "R", "forked", "R", at=1_002)
    await _run(store, "F", ["f1", "f2"], (30, 3), 0.25, cache=(10, 0))
    await _session(store, "B", "R", "spawned", "A", at=1_003)
    await _run(store, "B", ["b1"], (5, 1), 0.125)
    await _session(store, "G", "R", "forked", "F", at=1_004)
    await _run(store, "G", ["g1", "g2"], (7, 1), None)
    await _run(store, "R", ["r3", "r4"], (1_000, 100), 1.0, cache=(600, 50))  # a second run of the root, after the fork
    await _session(store, "U", "U")
    await _run(store, "U", ["u1"], (9_999, 9_999), 9.0)


async def test_session_tree(store: TreeStore, tmp_path: Path) -> None:
    await _tree(store)
    await export_parquet(store, tmp_path / "x")
    con = connect(tmp_path / "x")
    rows = con.sql("SELECT session_id, parent_id, lineage_kind, depth, fork_depth FROM session_tree('R')").fetchall()
    assert rows == [
        ("R", None, "root", 0, 0),
        ("A", "R", "spawned", 1, 0),
        ("F", "R", "forked", 1, 1),
        ("B", "A", "spawned", 2, 0),
        ("G", "F", "forked", 2, 2),
    ]
    assert con.sql("SELECT session_id, depth FROM session_tree('A')").fetchall() == [("A", 0), ("B", 1)]
    assert con.sql("SELECT count(*) FROM session_tree('nobody')").fetchall() == [(0,)]


async def test_tree_usage(store: TreeStore, tmp_path: Path) -> None:
    await _tree(store)
    await export_parquet(store, tmp_path / "x")
    con = connect(tmp_path / "x")
    usage = con.sql("SELECT * FROM tree_usage('R')").fetchall()
    # Sessions R, A, F, B, G; runs: two of R and one each of the others. U is another tree.
    assert usage == [(5, 6, 1_162, 117, 1_279, 6, 610, 50, 1.875)]  # cache reads and writes are parts of the input
    columns = [d[0] for d in con.sql("SELECT * FROM tree_usage('R')").description]
    assert columns[-3:] == ["cache_read_tokens", "cache_write_tokens", "cost"]
    assert con.sql("SELECT sessions, runs, total_tokens, cache_read_tokens, cost FROM tree_usage('F')").fetchall() == [
        (2, 2, 41, 10, 0.25)
    ]
    assert con.sql("SELECT * FROM tree_usage('nobody')").fetchall() == [(0, 0, 0, 0, 0, 0, 0, 0, None)]
    runs = con.sql("SELECT cache_read_tokens, cache_write_tokens FROM runs WHERE thread_id = 'R' ORDER BY 1")
    assert runs.fetchall() == [(0, 0), (600, 50)]


async def test_thread_messages(store: TreeStore, tmp_path: Path) -> None:
    await _tree(store)
    await export_parquet(store, tmp_path / "x")
    con = connect(tmp_path / "x")
    got = con.sql("SELECT position, role, text, model FROM thread_messages('G')").fetchall()
    # G is a fork of F, which forked R after R's first run: R's first two messages, F's two, then G's.
    assert got == [
        (0, "user", "r1", None), (1, "assistant", "r2", "model-R"), (2, "user", "f1", None),
        (3, "assistant", "f2", "model-F"), (4, "user", "g1", None), (5, "assistant", "g2", "model-G"),
    ]  # fmt: skip
    root = con.sql("SELECT text FROM thread_messages('R')").fetchall()
    assert [r[0] for r in root] == ["r1", "r2", "r3", "r4"]
    assert con.sql("SELECT count(*) FROM thread_messages('nobody')").fetchall() == [(0,)]
    # Shared messages appear once per thread that reaches them, and belong to one history entry.
    shared = con.sql("SELECT count(DISTINCT thread_id), count(DISTINCT entry_id) FROM messages WHERE text = 'r1'")
    assert shared.fetchall() == [(3, 1)]
