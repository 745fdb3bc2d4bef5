"""Diagnostics beside the timed runs: the SQL of a run statement by statement, pieces timed alone,
and bytes per step by run length."""

from __future__ import annotations

import operator
import os
import random
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pydantic

from benchmarks.harness.sqlite_files import disk_usage
from benchmarks.harness.timing import async_per_call_us, per_call_us
from benchmarks.steps.langgraph import empty_langgraph_bytes, run_langgraph_sync
from benchmarks.steps.report import (
    HEADLINE_IDEMPOTENT,
    HEADLINE_SCRIPT,
    SCRIPT_LABELS,
    SCRIPTS,
    BytesByRunLength,
    RunLengthRow,
    SqlBreakdown,
    StatementCost,
)
from benchmarks.steps.workload import (
    TOOL_NAME,
    USER_TEXT,
    repertory_model,
    repertory_tool,
    result_text,
    run_repertory,
    run_session,
)
from repertory import ModelMessage, Origin, RunState, ThreadState, ToolContext
from repertory.core.history import HistoryEntry, HistoryRevision, MessageHistory
from repertory.core.ids import new_id
from repertory.core.messages import ToolCallPart, ToolResultPart
from repertory.core.model import ModelSettings
from repertory.storage.sqlite.connection import use_wal
from repertory.storage.sqlite.schema import ensure_schema
from repertory.storage.sqlite.store import Durability, SqliteSessionStore
from repertory.testing import ScriptedModel

__all__ = ["bytes_by_run_length", "component_costs", "sql_breakdown"]


class TimedConnection(sqlite3.Connection):
    """A writer connection that times every statement by kind (diagnostic only: a Python call each)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def record(self, kind: str, started: float) -> None:
        """Add one statement of ``kind`` that started at ``started``."""
        self.seconds[kind] = self.seconds.get(kind, 0.0) + time.perf_counter() - started
        self.calls[kind] = self.calls.get(kind, 0) + 1

    @staticmethod
    def kind(sql: str, many: bool) -> str:
        """A statement's first words: what it is and on which table."""
        words = sql.split()
        head = " ".join(words[:5]) if words[:1] == ["INSERT"] else " ".join(words[:4])
        return ("executemany " if many else "") + head

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        """``Connection.execute``, timed."""
        started = time.perf_counter()
        try:
            return super().execute(sql, parameters)
        finally:
            self.record(self.kind(sql, False), started)

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> sqlite3.Cursor:
        """``Connection.executemany``, timed."""
        started = time.perf_counter()
        try:
            return super().executemany(sql, parameters)
        finally:
            self.record(self.kind(sql, True), started)


def _open_timed(db: Path, durability: Durability) -> tuple[SqliteSessionStore, TimedConnection]:
    """A store whose writer connection is a ``TimedConnection``, prepared as ``SqliteSessionStore.open`` does."""
    conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False, factory=TimedConnection)
    conn.execute("PRAGMA busy_timeout = 10000")
    conn.execute(f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}")
    ensure_schema(conn, str(db))
    use_wal(conn, str(db))
    conn.seconds.clear()
    conn.calls.clear()
    return SqliteSessionStore(os.path.abspath(db), conn, durability, False, True), conn


async def sql_breakdown(workdir: Path, steps: int, durability: Durability) -> SqlBreakdown:
    """Time each SQL statement kind of a run on a store whose writer connection times its statements.

    The timing adds a Python call per statement, so the run is not one of the timed ones.
    """
    store, timed = _open_timed(workdir / f"sql-{uuid.uuid4().hex[:8]}.db", durability)
    try:
        await run_session(store, steps, False, "fn", name="sql")
    finally:
        await store.close()
    requests = steps + 1
    rows = {
        kind: StatementCost(
            calls_per_step=timed.calls[kind] / requests,
            us_per_call=sec * 1e6 / timed.calls[kind],
            us_per_step=sec * 1e6 / requests,
        )
        for kind, sec in sorted(timed.seconds.items(), key=lambda kv: kv[1], reverse=True)
    }
    return SqlBreakdown(durability=durability, tool="default @tool", script="fn", statements=rows)


CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
CROCKFORD_PAIRS = [a + b for a in CROCKFORD for b in CROCKFORD]
PAIR_SHIFTS = range(120, -1, -10)


def ulid_loop(value: int) -> str:
    """The encoding ``repertory.core.ids.new_id`` uses today: 26 rounds of a Python loop."""
    chars = [""] * 26
    for i in range(25, -1, -1):
        chars[i] = CROCKFORD[value & 31]
        value >>= 5
    return "".join(chars)


def ulid_pairs(value: int) -> str:
    """The same 26 characters, two at a time from a 1,024-entry table: 13 rounds instead of 26."""
    return "".join([CROCKFORD_PAIRS[(value >> shift) & 1023] for shift in PAIR_SHIFTS])


def candidate_new_id() -> str:
    """``new_id`` with the pair-table encoding."""
    value = ((time.time_ns() // 1_000_000) << 80) | int.from_bytes(os.urandom(10), "big")
    return ulid_pairs(value)


class WithPrivate(pydantic.BaseModel):
    """A stand-in for MessageHistory's index caches: a pydantic model with a PrivateAttr."""

    public: dict[str, int] = pydantic.Field(default_factory=dict)
    _index: dict[str, int] = pydantic.PrivateAttr(default_factory=dict)


def _us(fn: Callable[[], object], calls: int) -> float:
    return per_call_us(fn, calls, rounds=5, warm=True)


async def _async_us(fn: Callable[[], Awaitable[Any]], calls: int) -> float:
    return await async_per_call_us(fn, calls, rounds=3)


async def component_costs(steps: int) -> dict[str, float]:
    """Microseconds of the pieces a step is made of, at the history depth the run ends with."""
    depth = 2 * steps
    call = ToolCallPart(tool_call_id="call_" + "A" * 26, tool_name=TOOL_NAME, args={"i": 123})
    assistant = ModelMessage(role="assistant", parts=[call], origin=Origin(kind="model"))
    result = ModelMessage(
        role="tool",
        origin=Origin(kind="tool"),
        parts=[ToolResultPart(tool_call_id=call.tool_call_id, tool_name=TOOL_NAME, result=result_text(123))],
    )
    history = MessageHistory()
    history.append(ModelMessage.user(USER_TEXT, origin=Origin(kind="user")))
    for _ in range(steps):
        history.append(assistant)
        history.append(result)
    messages = history.messages
    run = RunState(
        run_id="R" * 26, thread_id="T" * 26, agent="bench", step_index=steps, history_revision_id=history.revision_id
    )
    fetch = repertory_tool(False)
    ctx = ToolContext(call_id=call.tool_call_id, tool_name=TOOL_NAME, run_id=run.run_id, thread_id=run.thread_id)
    private = WithPrivate()
    # Both reads through attrgetter, so they pay the same call and differ only in the attribute's path.
    read_private, read_public = operator.attrgetter("_index"), operator.attrgetter("public")
    costs: dict[str, float] = {}
    n = 2_000
    costs["assistant message model_dump_json"] = _us(assistant.model_dump_json, n)
    costs["tool message model_dump_json (~1.1 KB)"] = _us(result.model_dump_json, n)
    costs["RunState.model_dump_json"] = _us(run.model_dump_json, n)
    costs["ModelMessage.model_copy(update=origin)"] = _us(
        lambda: assistant.model_copy(update={"origin": Origin(kind="model")}), n
    )
    costs["ToolCallPart + ModelMessage construction"] = _us(
        lambda: ModelMessage(
            role="assistant", parts=[ToolCallPart(tool_call_id="c", tool_name=TOOL_NAME, args={"i": 1})]
        ),
        n,
    )
    grown = history.branch()
    entry_args: dict[str, Any] = {"id": "E" * 26, "message": result, "created_at": 1}
    rev_args: dict[str, Any] = {
        "id": "V" * 26,
        "parent_id": "P" * 26,
        "entry_id": "E" * 26,
        "depth": 3,
        "created_at": 1,
    }
    costs["HistoryEntry(...) (validated)"] = _us(lambda: HistoryEntry(**entry_args), n)
    costs["HistoryEntry.model_construct(...)"] = _us(lambda: HistoryEntry.model_construct(**entry_args), n)
    costs["HistoryRevision(...) (validated)"] = _us(lambda: HistoryRevision(**rev_args), n)
    costs["ThreadState(...) (validated)"] = _us(
        lambda: ThreadState(thread_id="T" * 26, history_revision_id="V" * 26, created_at=1, updated_at=2), n
    )
    costs["Usage + Usage"] = _us(lambda: run.usage + run.usage, n)
    costs[f"MessageHistory.append at depth >= {depth}"] = _us(lambda: grown.append(result), n)
    costs["pydantic PrivateAttr read (BaseModel.__getattr__)"] = _us(lambda: read_private(private), 20_000)
    costs["pydantic public field read"] = _us(lambda: read_public(private), 20_000)
    costs[f"list(messages) copy at depth {depth}"] = _us(lambda: list(messages), n)
    costs[f"sum(m.role == 'assistant') scan at depth {depth}"] = _us(
        lambda: sum(1 for m in messages if m.role == "assistant"), 200
    )
    costs[f"sum(len(m.text)) token estimate at depth {depth}"] = _us(lambda: sum(len(m.text) for m in messages), 200)
    settings = ModelSettings()
    for script in SCRIPTS:
        model = repertory_model(script, steps + 1)

        async def ask(model: ScriptedModel = model) -> None:
            async for _ in model.request(messages, [], settings):
                pass

        costs[f"{SCRIPT_LABELS[script]}.request at depth {depth}"] = await _async_us(ask, 200)
    rng = random.Random(7)
    for _ in range(1_000):
        value = rng.getrandbits(128)
        if ulid_loop(value) != ulid_pairs(value):
            raise RuntimeError("the pair-table id encoding does not match the loop")
    costs["ids.new_id (as shipped)"] = _us(new_id, n)
    costs["new_id candidate: 2-character table, 13 rounds (same output)"] = _us(candidate_new_id, n)
    costs["Tool.invoke (async tool)"] = await _async_us(lambda: fetch.invoke({"i": 1}, ctx), n)
    return costs


async def _empty_repertory_bytes(workdir: Path) -> int:
    """Bytes of an empty repertory database (its schema only)."""
    db = workdir / f"empty-{uuid.uuid4().hex[:8]}.db"
    await (await SqliteSessionStore.open(db)).close()
    return disk_usage(db).bytes_on_disk


async def bytes_by_run_length(
    workdir: Path, lengths: Sequence[int], peers: bool, known: dict[int, dict[str, int]]
) -> BytesByRunLength:
    """Bytes on disk per step after runs of each length: flat for repertory, growing for LangGraph.

    Each figure is (database + WAL after a TRUNCATE checkpoint, minus the empty database) / steps.
    ``known`` holds bytes already measured by the timed runs (length -> {"repertory": b,
    "langgraph": b}) so the longest, costliest LangGraph run is not repeated. repertory runs its
    headline configuration: durability normal, the default ``@tool``, the plain list script.
    """
    empty = {"repertory": await _empty_repertory_bytes(workdir)}
    if peers:
        empty["langgraph"] = empty_langgraph_bytes(workdir)
    rows = []
    for steps in sorted({*lengths, *known}):
        measured = dict(known.get(steps, {}))
        if "repertory" not in measured:
            run = await run_repertory(workdir, steps, "normal", HEADLINE_IDEMPOTENT, HEADLINE_SCRIPT, measure_disk=True)
            assert run.disk is not None
            measured["repertory"] = run.disk.bytes_on_disk
        if peers and "langgraph" not in measured:
            peer = run_langgraph_sync(workdir, steps)
            assert peer.disk is not None
            measured["langgraph"] = peer.disk.bytes_on_disk
        mine, theirs = measured["repertory"], measured.get("langgraph")
        rows.append(
            RunLengthRow(
                steps=steps,
                repertory_bytes_on_disk=mine,
                repertory_bytes_per_step=(mine - empty["repertory"]) / steps,
                langgraph_bytes_on_disk=theirs,
                langgraph_bytes_per_step=None if theirs is None else (theirs - empty["langgraph"]) / steps,
            )
        )
    return BytesByRunLength(
        empty_database_bytes=empty,
        repertory_config=f"durability normal, default @tool, {SCRIPT_LABELS[HEADLINE_SCRIPT]}",
        langgraph_config="SqliteSaver + graph.invoke" if peers else None,
        rows=rows,
    )
