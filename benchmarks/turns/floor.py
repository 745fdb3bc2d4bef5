"""The raw ``sqlite3`` floor of a two-step turn: the durable writes it needs, nothing else.

A two-step turn (a tool call, then a final answer) must make durable its four messages (the user's
prompt, the assistant's tool call, the tool's result, the final answer) and its run row, and the
tool call must be durable before the tool runs: two transactions. The first writes the user message
and the tool call (each a revision carrying its message, as a step writes it), the new run row and
the thread's head; the second
the result and the answer, the run row (done) and the head again. Statements, schema and pragmas
are the store's own (through ``benchmarks.store.raw``), ids and JSON are made before the clock
starts, one connection, one turn after another: whatever the tree adds on top is the ratio.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.store.raw import INSERT_REVISION, connect_raw
from repertory.core.ids import new_id, now_ms
from repertory.core.messages import ModelMessage, Origin, TextPart, ToolCallPart, ToolResultPart
from repertory.core.state import RunState
from repertory.storage.sqlite.store import UPSERT_RUN, UPSERT_THREAD, Durability, run_row

__all__ = ["FloorRun", "raw_floor", "turn_messages"]

TOOL = "lookup"


def turn_messages(prompt: str) -> list[ModelMessage]:
    """The four messages of a two-step turn, as the tree's turn stores them (same parts, same size)."""
    call_id = new_id()
    return [
        ModelMessage(role="user", parts=[TextPart(text=prompt)], origin=Origin(kind="user")),
        ModelMessage(
            role="assistant",
            parts=[ToolCallPart(tool_call_id=call_id, tool_name=TOOL, args={"q": prompt})],
            origin=Origin(kind="model"),
        ),
        ModelMessage(
            role="tool",
            parts=[ToolResultPart(tool_call_id=call_id, tool_name=TOOL, result=f"facts about {prompt}")],
            origin=Origin(kind="tool"),
        ),
        ModelMessage(role="assistant", parts=[TextPart(text="ok")], origin=Origin(kind="model")),
    ]


@dataclass(frozen=True)
class FloorRun:
    """One timed floor loop."""

    turns: int
    seconds: float
    cpu_seconds: float
    transactions: int


def _prepare(sessions: int, turns: int) -> list[list[tuple[Any, ...]]]:
    """Per turn, its two transactions' rows: (revisions, run row, thread row) each."""
    heads: dict[int, tuple[str, str | None, int]] = {i: (new_id(), None, 0) for i in range(sessions)}
    out: list[list[tuple[Any, ...]]] = []
    for t in range(turns):
        for i in range(sessions):
            thread_id, parent, depth = heads[i]
            run = RunState(run_id=new_id(), thread_id=thread_id, agent="assistant")
            txns: list[tuple[Any, ...]] = []
            messages = turn_messages(f"session {i} turn {t}")
            for half in (messages[:2], messages[2:]):
                at = now_ms()
                revisions = []
                for message in half:
                    entry_id, revision_id = new_id(), new_id()
                    depth += 1
                    text = message.model_dump_json()
                    revisions.append((revision_id, parent, entry_id, depth, at, thread_id, at, text))
                    parent = revision_id
                run.history_revision_id, run.step_index, run.updated_at = parent, run.step_index + 1, at
                if half is not messages[:2]:
                    run.status = "done"
                txns.append((revisions, run_row(run), (thread_id, parent, at, at)))
            heads[i] = (thread_id, parent, depth)
            out.append(txns)
    return out


def raw_floor(path: Path, sessions: int, turns: int, durability: Durability = "normal") -> FloorRun:
    """``sessions`` x ``turns`` two-step turns' durable writes, one turn after another, on a fresh file."""
    conn = connect_raw(path, durability)
    try:
        plan = _prepare(sessions, turns)
        gc.collect()
        start, cpu = time.perf_counter(), time.process_time()
        for txns in plan:
            for revisions, run, thread in txns:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(INSERT_REVISION, revisions)
                conn.execute(UPSERT_RUN, run)
                conn.execute(UPSERT_THREAD, thread)
                conn.execute("COMMIT")
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        conn.close()
    return FloorRun(turns=len(plan), seconds=seconds, cpu_seconds=cpu, transactions=2 * len(plan))
