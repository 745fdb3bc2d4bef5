"""The peer: the same workload on LangGraph, the way its users run it, with its SQLite checkpointers.

A ``StateGraph(MessagesState)`` (``add_messages`` reducer), a model node that returns the scripted
``AIMessage`` tool call (a plain function node, cheaper than any fake chat model, so the comparison
leans LangGraph's way), the prebuilt ``ToolNode`` and ``tools_condition``, compiled with a
checkpointer so every super-step is checkpointed, with LangGraph's defaults. LangGraph is the
``bench`` extra: it is imported only here, inside the functions, so the rest runs without it.
"""

from __future__ import annotations

import gc
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.harness.sqlite_files import disk_usage, remove_database
from benchmarks.steps.report import LangGraphRun
from benchmarks.steps.workload import FINAL_TEXT, TOOL_NAME, USER_TEXT, call_id, result_text

__all__ = ["GRAPH", "empty_langgraph_bytes", "run_langgraph_async", "run_langgraph_sync"]

GRAPH = (
    "StateGraph(MessagesState): model node (plain function emitting the scripted "
    "AIMessage tool call) -> tools_condition -> prebuilt ToolNode -> model node"
)


def _builder(steps: int, is_async: bool) -> Any:
    """StateGraph(MessagesState): model node -> tools_condition -> ToolNode -> model node."""
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool as lc_tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    def reply(state: MessagesState) -> dict[str, Any]:
        # The user message, then one AI/tool pair per finished step: O(1), no scan of the history.
        k = (len(state["messages"]) - 1) // 2
        if k >= steps:
            return {"messages": [AIMessage(content=FINAL_TEXT)]}
        call = {"name": TOOL_NAME, "args": {"i": k}, "id": call_id(), "type": "tool_call"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}

    async def areply(state: MessagesState) -> dict[str, Any]:
        return reply(state)

    def fetch(i: int) -> str:
        """Fetch record ``i``."""
        return result_text(i)

    async def afetch(i: int) -> str:
        """Fetch record ``i``."""
        return result_text(i)

    fetch_tool = lc_tool(TOOL_NAME)(afetch if is_async else fetch)
    builder = StateGraph(MessagesState)
    builder.add_node("model", areply if is_async else reply)
    builder.add_node("tools", ToolNode([fetch_tool]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder


def _inputs(steps: int) -> tuple[dict[str, Any], dict[str, Any]]:
    from langchain_core.messages import HumanMessage

    config = {"configurable": {"thread_id": "bench"}, "recursion_limit": 2 * steps + 10}
    return {"messages": [HumanMessage(content=USER_TEXT)]}, config


def _check(out: dict[str, Any], steps: int) -> None:
    messages = out["messages"]
    if len(messages) != 2 * steps + 2 or messages[-1].content != FINAL_TEXT:
        raise RuntimeError(f"LangGraph run ended wrongly: {len(messages)} messages")


def _db_facts(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(db)
    try:
        checkpoints, blob = conn.execute(
            "SELECT count(*), coalesce(sum(length(checkpoint)), 0) FROM checkpoints"
        ).fetchone()
        (last,) = conn.execute(
            "SELECT length(checkpoint) FROM checkpoints ORDER BY checkpoint_id DESC LIMIT 1"
        ).fetchone()
        writes, wblob = conn.execute("SELECT count(*), coalesce(sum(length(value)), 0) FROM writes").fetchone()
    finally:
        conn.close()
    return {
        "checkpoints": checkpoints,
        "checkpoint_blob_bytes": blob,
        "last_checkpoint_blob_bytes": last,
        "writes": writes,
        "write_blob_bytes": wblob,
    }


def run_langgraph_sync(workdir: Path, steps: int) -> LangGraphRun:
    """``SqliteSaver.from_conn_string`` + ``graph.invoke``: LangGraph's documented SQLite path."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = workdir / f"langgraph-sync-{uuid.uuid4().hex[:8]}.db"
    try:
        with SqliteSaver.from_conn_string(str(db)) as saver:
            graph = _builder(steps, is_async=False).compile(checkpointer=saver)
            inputs, config = _inputs(steps)
            gc.collect()
            start = time.perf_counter()
            out = graph.invoke(inputs, config)
            seconds = time.perf_counter() - start
            _check(out, steps)
            synchronous = saver.conn.execute("PRAGMA synchronous").fetchone()[0]
            journal = saver.conn.execute("PRAGMA journal_mode").fetchone()[0]
            disk = disk_usage(db)
        facts = _db_facts(db)
    finally:
        remove_database(db)
    return LangGraphRun(
        saver="SqliteSaver",
        invoke="graph.invoke",
        steps=steps,
        seconds=seconds,
        steps_per_s=(steps + 1) / seconds,
        us_per_step=seconds * 1e6 / (steps + 1),
        sqlite_synchronous=synchronous,
        journal_mode=journal,
        disk=disk,
        **facts,
    )


async def run_langgraph_async(workdir: Path, steps: int) -> LangGraphRun:
    """``AsyncSqliteSaver.from_conn_string`` (aiosqlite) + ``graph.ainvoke``."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    db = workdir / f"langgraph-async-{uuid.uuid4().hex[:8]}.db"
    try:
        async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:
            graph = _builder(steps, is_async=True).compile(checkpointer=saver)
            inputs, config = _inputs(steps)
            gc.collect()
            start = time.perf_counter()
            out = await graph.ainvoke(inputs, config)
            seconds = time.perf_counter() - start
            _check(out, steps)
            async with saver.conn.execute("PRAGMA synchronous") as cur:
                row = await cur.fetchone()
                synchronous = None if row is None else row[0]
            async with saver.conn.execute("PRAGMA journal_mode") as cur:
                row = await cur.fetchone()
                journal = None if row is None else row[0]
            disk = disk_usage(db)
        facts = _db_facts(db)
    finally:
        remove_database(db)
    return LangGraphRun(
        saver="AsyncSqliteSaver",
        invoke="graph.ainvoke",
        steps=steps,
        seconds=seconds,
        steps_per_s=(steps + 1) / seconds,
        us_per_step=seconds * 1e6 / (steps + 1),
        sqlite_synchronous=synchronous,
        journal_mode=journal,
        disk=disk,
        **facts,
    )


def empty_langgraph_bytes(workdir: Path) -> int:
    """Bytes of an empty LangGraph checkpoint database (its schema only)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = workdir / f"empty-lg-{uuid.uuid4().hex[:8]}.db"
    with SqliteSaver.from_conn_string(str(db)) as saver:
        saver.setup()
    return disk_usage(db).bytes_on_disk
