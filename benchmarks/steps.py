"""Steps: model steps per second of one session, repertory against LangGraph, on SQLite; bytes per step.

One session whose model calls one tool a step for N steps (1,000; ``--quick`` 20), then replies:
N + 1 model requests a run, and steps/s is requests over the run's wall time. The tool returns 1 KB
of text, so a step adds an assistant/tool pair of ~1.35 KB of JSON. Nothing here asserts a speed.

- repertory runs its public API: ``Session.start()`` on an ``Agent`` with a zero-delay
  ``ScriptedModel`` on ``SqliteSessionStore`` (durability normal and full). The headline script is
  the plain list a user writes; ``ScriptedModel`` then estimates usage and finds its step by
  scanning the conversation, work a real adapter does not do in the caller's process, so the same
  script is also timed with usage given and as a step function (no scan: the engine's own cost).
  The tool is the default ``@tool`` (its call committed before it runs, then the step: two commits
  a step, like LangGraph's two checkpoints) and ``@tool(idempotent=True)`` (one). Every
  configuration runs once a round, rounds alternating, so a noisy neighbour hits all alike.
- LangGraph (the ``bench`` extra; ``--skip-peers`` leaves it out) runs as its users run it: a
  ``StateGraph(MessagesState)``, a model node returning the scripted tool call (a plain function,
  cheaper than any fake chat model: the comparison leans LangGraph's way), the prebuilt ``ToolNode``
  and ``tools_condition``, a checkpointer as ``from_conn_string`` builds it, LangGraph's defaults
  (``durability`` "async"): ``SqliteSaver`` + ``invoke`` is the reference, ``AsyncSqliteSaver`` +
  ``ainvoke`` is timed too (full mode), and so is a 100-step run (its step cost grows with the run).
- Disk is read after ``wal_checkpoint(TRUNCATE)``; bytes per step by run length (the empty
  database taken off) are flat for repertory and grow for LangGraph, whose checkpoints hold the
  whole history: ``bytes_per_step_vs_run_length.png``.
- Where the time goes, on untimed runs: commits and WAL pages a step (short runs), cProfile by
  category (builtins charged to their callers; SQLite's C time kept, the Python scaled back to the
  unprofiled wall time) and by piece, the SQL statement by statement (a writer connection that times
  each), and the step's pieces timed alone by pyperf at the depth a run ends with.

``python -m benchmarks.steps [--quick] [--skip-peers] [--steps N]``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import operator
import os
import random
import sqlite3
import statistics
import string
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic

from benchmarks.harness.command import Options, Timer, main
from benchmarks.harness.figures import Figures, Plot, Target
from benchmarks.harness.profiling import (
    Key,
    charged_to_callers,
    label,
    matches,
    stats_of,
    top_by_tottime,
    total_tottime,
)
from benchmarks.harness.sqlite_files import DiskUsage, disk_usage, remove_database, scalar
from repertory import Agent, ModelMessage, Origin, RunState, Session, ThreadState, Tool, ToolContext, tool
from repertory.core.history import HistoryEntry, HistoryRevision, MessageHistory
from repertory.core.ids import new_id
from repertory.core.messages import ToolCallPart, ToolResultPart
from repertory.core.model import ModelSettings
from repertory.core.store import SessionStore
from repertory.storage.sqlite.connection import use_wal
from repertory.storage.sqlite.schema import ensure_schema
from repertory.storage.sqlite.store import Durability, SqliteSessionStore
from repertory.testing import ScriptedModel

SIZES = {"full": (1_000, 3, (10, 30, 100, 300)), "quick": (20, 1, (5, 10))}
"""Tool steps a run, rounds, the shorter run lengths of the bytes-per-step plot."""
SHORT = 100
SCRIPTS = {"list": "ScriptedModel(list)", "list+usage": "ScriptedModel(list, usage given)",
           "fn": "ScriptedModel(step function)"}  # fmt: skip
TOOLS = {False: "default @tool", True: "idempotent @tool"}
DURABILITIES: tuple[Durability, ...] = ("normal", "full")
TARGETS = {"normal": 10.0, "full": 3.0}
"""Steps/s against LangGraph SqliteSaver, at least, for the headline (default @tool, the plain list)."""
RESULT_CHARS, TOOL_NAME = 1_000, "fetch"
FINAL, USER = "All records fetched.", "Fetch every record, one tool call at a time."
FILLER = "".join(random.Random(1).choices(string.ascii_letters + " ", k=RESULT_CHARS))
PLOT = Plot("bytes_per_step_vs_run_length.png", "Bytes per step vs run length (SQLite, empty database taken off)",
            "run length (tool steps)", "bytes on disk per step", log_y=True)  # fmt: skip
GRAPH = "StateGraph(MessagesState): model node (plain function) -> tools_condition -> ToolNode -> model node"


def result_text(i: int) -> str:
    """The tool's reply for record ``i``: exactly ``RESULT_CHARS`` characters, different every step."""
    prefix = f"record {i:06d}: "
    return prefix + FILLER[len(prefix) :]


def repertory_tool(idempotent: bool) -> Tool:
    @tool(name=TOOL_NAME, idempotent=idempotent)
    async def fetch(i: int) -> str:
        """Fetch record ``i``."""
        return result_text(i)

    return fetch


def repertory_model(script: str, steps: int) -> ScriptedModel:
    """N tool calls, then the final text: a plain list, the list with usage given, or a step function."""
    if script == "list":
        return ScriptedModel([*({"tool": TOOL_NAME, "args": {"i": k}} for k in range(steps)), {"text": FINAL}])
    usage = {"input_tokens": 100, "output_tokens": 20}
    plan = [{"tool": TOOL_NAME, "args": {"i": k}, "usage": usage} for k in range(steps)] + [
        {"text": FINAL, "usage": usage}
    ]
    if script == "list+usage":
        return ScriptedModel(plan)

    def step(messages: list[ModelMessage], tools: list[Any]) -> dict[str, Any]:
        return plan[(len(messages) - 1) // 2]  # the user message, then a pair a finished step

    return ScriptedModel(step)


def _agent(steps: int, idempotent: bool, script: str) -> Agent:
    return Agent(name="bench", model=repertory_model(script, steps), tools=[repertory_tool(idempotent)],
                 max_steps=steps + 1)  # fmt: skip


@dataclass
class Run:
    """One timed run (repertory's or LangGraph's) and, when read, the disk it left."""

    steps: int
    seconds: float
    disk: DiskUsage | None = None
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def steps_per_s(self) -> float:
        return (self.steps + 1) / self.seconds


async def run_repertory(workdir: Path, steps: int, durability: Durability, idempotent: bool, script: str,
                        profile: cProfile.Profile | None = None, measure_disk: bool = False) -> Run:  # fmt: skip
    """One session, one run of ``steps`` tool steps and a final reply, on a fresh database file."""
    db = workdir / f"repertory-{uuid.uuid4().hex[:8]}.db"
    store = await SqliteSessionStore.open(db, durability=durability)
    try:
        session = Session(store=store, agent=_agent(steps, idempotent, script))
        gc.collect()
        start = time.perf_counter()
        if profile is not None:
            profile.enable()
        result = await session.start(USER)
        if profile is not None:
            profile.disable()
        run = Run(steps, time.perf_counter() - start)
        if result.status != "done" or result.state.step_index != steps + 1 or result.text != FINAL:
            raise RuntimeError(f"repertory run ended wrongly: {result.status} at step {result.state.step_index}")
        if measure_disk:
            run.disk = disk_usage(db)
            count, run.facts["message_json"] = scalar(db, "SELECT count(*), sum(length(message)) FROM history_entries")
            (run.facts["run_state_json"],) = scalar(db, "SELECT sum(length(state)) FROM runs")
            if count != 2 * steps + 2:
                raise RuntimeError(f"repertory stored {count} messages, expected {2 * steps + 2}")
    finally:
        await store.close()
        remove_database(db)
    return run


async def run_session(store: SessionStore, steps: int, idempotent: bool, script: str) -> None:
    """One untimed run on ``store`` (the diagnostic runs: counted, wrapped connections)."""
    await Session(store=store, agent=_agent(steps, idempotent, script)).start(USER)


# -- LangGraph ------------------------------------------------------------------------------------------------


def _graph(steps: int, is_async: bool) -> Any:
    """StateGraph(MessagesState): model node -> tools_condition -> ToolNode -> model node."""
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool as lc_tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    def reply(state: MessagesState) -> dict[str, Any]:
        k = (len(state["messages"]) - 1) // 2  # O(1), no scan of the history
        if k >= steps:
            return {"messages": [AIMessage(content=FINAL)]}
        call = {"name": TOOL_NAME, "args": {"i": k}, "id": "call_" + uuid.uuid4().hex[:26], "type": "tool_call"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}

    async def areply(state: MessagesState) -> dict[str, Any]:
        return reply(state)

    def fetch(i: int) -> str:
        """Fetch record ``i``."""
        return result_text(i)

    async def afetch(i: int) -> str:
        """Fetch record ``i``."""
        return result_text(i)

    builder = StateGraph(MessagesState)
    builder.add_node("model", areply if is_async else reply)
    builder.add_node("tools", ToolNode([lc_tool(TOOL_NAME)(afetch if is_async else fetch)]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder


def _inputs(steps: int) -> tuple[dict[str, Any], dict[str, Any]]:
    from langchain_core.messages import HumanMessage

    config = {"configurable": {"thread_id": "bench"}, "recursion_limit": 2 * steps + 10}
    return {"messages": [HumanMessage(content=USER)]}, config


def _langgraph_run(db: Path, steps: int, seconds: float, out: dict[str, Any], pragmas: tuple[Any, Any]) -> Run:
    messages = out["messages"]
    if len(messages) != 2 * steps + 2 or messages[-1].content != FINAL:
        raise RuntimeError(f"LangGraph run ended wrongly: {len(messages)} messages")
    run = Run(steps, seconds, disk_usage(db))
    conn = sqlite3.connect(db)
    try:
        count, blob = conn.execute("SELECT count(*), coalesce(sum(length(checkpoint)), 0) FROM checkpoints").fetchone()
        (last,) = conn.execute("SELECT length(checkpoint) FROM checkpoints ORDER BY checkpoint_id DESC").fetchone()
        writes, wblob = conn.execute("SELECT count(*), coalesce(sum(length(value)), 0) FROM writes").fetchone()
    finally:
        conn.close()
    run.facts = {"checkpoints": count, "checkpoint blobs": blob, "the last checkpoint blob": last, "writes": writes,
                 "write blobs": wblob, "synchronous": pragmas[0], "journal_mode": pragmas[1]}  # fmt: skip
    return run


def run_langgraph_sync(workdir: Path, steps: int) -> Run:
    """``SqliteSaver.from_conn_string`` + ``graph.invoke``: LangGraph's documented SQLite path."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = workdir / f"langgraph-{uuid.uuid4().hex[:8]}.db"
    try:
        with SqliteSaver.from_conn_string(str(db)) as saver:
            graph = _graph(steps, is_async=False).compile(checkpointer=saver)
            gc.collect()
            start = time.perf_counter()
            out = graph.invoke(*_inputs(steps))
            seconds = time.perf_counter() - start
            pragmas = tuple(saver.conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("synchronous", "journal_mode"))
        return _langgraph_run(db, steps, seconds, out, (pragmas[0], pragmas[1]))
    finally:
        remove_database(db)


async def run_langgraph_async(workdir: Path, steps: int) -> Run:
    """``AsyncSqliteSaver.from_conn_string`` (aiosqlite) + ``graph.ainvoke``."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    db = workdir / f"langgraph-async-{uuid.uuid4().hex[:8]}.db"
    try:
        async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:
            graph = _graph(steps, is_async=True).compile(checkpointer=saver)
            gc.collect()
            start = time.perf_counter()
            out = await graph.ainvoke(*_inputs(steps))
            seconds = time.perf_counter() - start
            pragmas = []
            for p in ("synchronous", "journal_mode"):
                async with saver.conn.execute(f"PRAGMA {p}") as cur:
                    pragmas.append((await cur.fetchone() or [None])[0])
        return _langgraph_run(db, steps, seconds, out, (pragmas[0], pragmas[1]))
    finally:
        remove_database(db)


def _empty_langgraph_bytes(workdir: Path) -> int:
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = workdir / "empty-langgraph.db"
    with SqliteSaver.from_conn_string(str(db)) as saver:
        saver.setup()
    return disk_usage(db).bytes_on_disk


# -- where the time goes --------------------------------------------------------------------------------------


async def count_commits(figures: Figures, workdir: Path, idempotent: bool) -> float:
    """Commits and WAL pages a step, from runs of 10 and 30 steps (a wrapper would perturb timed runs);
    short enough that SQLite's auto-checkpoint never restarts the log. Commits a tool step."""
    counts: dict[int, tuple[int, int]] = {}
    for steps in (10, 30):
        db = workdir / f"count-{uuid.uuid4().hex[:8]}.db"
        store = await SqliteSessionStore.open(db)
        calls, inner = 0, store.commit_session

        async def counted(inner: Any = inner, **kwargs: Any) -> None:
            nonlocal calls
            calls += 1
            await inner(**kwargs)

        store.commit_session = counted  # type: ignore[method-assign]
        probe = sqlite3.connect(db)
        try:
            probe.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            await run_session(store, steps, idempotent, "fn")
            frames = probe.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
        finally:
            probe.close()
            await store.close()
        counts[steps] = (calls, int(frames))
    per_step = (counts[30][0] - counts[10][0]) / 20
    pages = (counts[30][1] - counts[10][1]) / (counts[30][0] - counts[10][0])
    name = TOOLS[idempotent]
    figures.value(f"commits a tool step, {name}", per_step, "commits")
    figures.value(f"commits a run besides its tool steps, {name}", counts[10][0] - per_step * 10, "commits")
    figures.value(f"WAL pages a commit, {name}", pages, "pages")
    figures.value(f"WAL pages a tool step, {name}", pages * per_step, "pages")
    return per_step


def direct_category(key: Key) -> str | None:
    """The category a function's own time belongs to, or None to charge it to its callers."""
    file, _, name = key
    if file == "~":
        if "sqlite3." in name:
            return "sqlite execute"
        if "SchemaSerializer" in name or "to_jsonable_python" in name or name.endswith("to_json>"):
            return "pydantic serialize"
        return "pydantic validate/construct/copy" if "SchemaValidator" in name or "pydantic_core" in name else None
    path = file.replace("\\", "/")
    if "/pydantic/" in path or "/pydantic_core/" in path:
        if name == "__getattr__":
            return "pydantic private-attr reads"
        return "pydantic serialize" if name in ("model_dump_json", "model_dump") else "pydantic validate/construct/copy"
    rules = (("/repertory/testing/", "ScriptedModel"), ("repertory/core/history.py", "history (MessageHistory)"),
             ("repertory/runtime/tools.py", "tools + asyncio"), ("repertory/runtime/_calls.py", "tools + asyncio"),
             ("/asyncio/", "tools + asyncio"), ("/benchmarks/steps.py", "tools + asyncio"),
             ("/repertory/storage/", "store Python (plan, rows, guards)"),
             ("repertory/core/ids.py", "ids + clock"))  # fmt: skip
    for part, category in rules:
        if part in path:
            return category
    if ("/repertory/runtime/" in path or "/repertory/core/" in path) and not path.endswith("messages.py"):
        return "step loop (Drive, Session)"
    return None


INCLUSIVE = [  # the inclusive time of a step's pieces: (label, file suffix, function)
    ("Drive.request (one model request, incl. stream)", "repertory/runtime/_loop.py", "request"),
    ("ScriptedModel.request (async generator)", "repertory/testing/scripted.py", "request"),
    ("Drive.request_messages (list copy)", "repertory/runtime/_loop.py", "request_messages"),
    ("Drive._settle (plan + run calls, append result)", "repertory/runtime/_loop.py", "_settle"),
    ("Tool.invoke (validate args, run, to_jsonable)", "repertory/runtime/tools.py", "invoke"),
    ("Drive.append -> MessageHistory.append", "repertory/core/history.py", "append"),
    ("Drive.commit (one checkpoint)", "repertory/runtime/_loop.py", "commit"),
    ("SqliteSessionStore.commit_session", "repertory/storage/sqlite/store.py", "commit_session"),
    ("plan_commit (walk back, delta)", "repertory/storage/commit_plan.py", "plan_commit"),
    ("run_row (RunState.model_dump_json)", "repertory/storage/sqlite/store.py", "run_row"),
    ("BaseModel.model_dump_json (all callers)", "pydantic/main.py", "model_dump_json"),
    ("BaseModel.model_copy (all callers)", "pydantic/main.py", "model_copy"),
    ("BaseModel.__getattr__ (private attrs, all callers)", "pydantic/main.py", "__getattr__"),
    ("ids.new_id", "repertory/core/ids.py", "new_id"),
]


async def profile(figures: Figures, workdir: Path, steps: int, script: str, wall: float) -> None:
    """cProfile of one run: own time by category (estimated unprofiled), the pieces inclusive, the top functions."""
    profiler = cProfile.Profile()
    await run_repertory(workdir, steps, "normal", False, script, profile=profiler)
    stats, requests, head = stats_of(profiler), steps + 1, f"cProfile, {SCRIPTS[script]}"
    profiled = total_tottime(stats) / requests
    figures.time(f"{head}: a step, profiled", profiled, note=f"{wall * 1e6:.0f} us unprofiled")
    figures.value(f"{head}: the profiler's inflation", profiled / wall, "x")
    cats = {k: v / requests for k, v in charged_to_callers(stats, direct_category).items()}
    c_time = cats.get("sqlite execute", 0.0)  # the profiler slows Python calls, not sqlite3's C
    scale = (wall - c_time) / (profiled - c_time) if profiled > c_time else 0.0
    if scale:
        figures.value(f"{head}: the profiler's inflation of Python", 1 / scale, "x")
    for cat, s in sorted(cats.items(), key=lambda kv: kv[1], reverse=True):
        figures.time(f"{head}: {cat}, a step", s * (1.0 if cat == "sqlite execute" else scale),
                     note=f"estimated unprofiled; {s / profiled:.0%} of the profiled time, "
                     f"{s * 1e6:.1f} us profiled")  # fmt: skip
    for piece, suffix, name in INCLUSIVE:
        found = [v for k, v in stats.items() if matches(k, suffix, name)]
        if found:
            figures.time(f"{head}: {piece}, inclusive, a step", sum(v[3] for v in found) / requests,
                         note=f"profiled; {sum(v[1] for v in found) / requests:.2f} calls a step")  # fmt: skip
    figures.fact(f"{head}: top own time, us a step",
                 "; ".join(f"{label(k)} {v[2] * 1e6 / requests:.1f}" for k, v in top_by_tottime(stats, 8)))  # fmt: skip


class TimedConnection(sqlite3.Connection):
    """A writer connection timing every statement by kind (diagnostic only: a Python call each)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def _record(self, sql: str, many: bool, started: float) -> None:
        words = sql.split()
        kind = ("executemany " if many else "") + " ".join(words[: 5 if words[:1] == ["INSERT"] else 4])
        self.seconds[kind] = self.seconds.get(kind, 0.0) + time.perf_counter() - started
        self.calls[kind] = self.calls.get(kind, 0) + 1

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        started = time.perf_counter()
        try:
            return super().execute(sql, parameters)
        finally:
            self._record(sql, False, started)

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> sqlite3.Cursor:
        started = time.perf_counter()
        try:
            return super().executemany(sql, parameters)
        finally:
            self._record(sql, True, started)


async def sql_statements(figures: Figures, workdir: Path, steps: int, durability: Durability) -> None:
    """Each SQL statement kind of a run (default @tool, step function), on a store whose writer times them."""
    db = workdir / f"sql-{uuid.uuid4().hex[:8]}.db"
    conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False, factory=TimedConnection)
    conn.execute("PRAGMA busy_timeout = 10000")
    conn.execute(f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}")
    ensure_schema(conn, str(db))
    use_wal(conn, str(db))
    conn.seconds.clear()
    conn.calls.clear()
    store = SqliteSessionStore(os.path.abspath(db), conn, durability, False, True)  # as open() prepares it
    try:
        await run_session(store, steps, False, "fn")
    finally:
        await store.close()
    requests = steps + 1
    for kind, sec in sorted(conn.seconds.items(), key=lambda kv: kv[1], reverse=True):
        if sec / requests >= 0.05e-6:
            figures.time(f"SQL a step, {durability}: {kind}", sec / requests,
                         note=f"{conn.calls[kind] / requests:.2f} calls a step, "
                         f"{sec / conn.calls[kind] * 1e6:.1f} us a call")  # fmt: skip


# The id encoding new_id uses, against a candidate that takes two characters a round from a table.
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
CROCKFORD_PAIRS = [a + b for a in CROCKFORD for b in CROCKFORD]


def ulid_loop(value: int) -> str:
    chars = [""] * 26
    for i in range(25, -1, -1):
        chars[i] = CROCKFORD[value & 31]
        value >>= 5
    return "".join(chars)


def ulid_pairs(value: int) -> str:
    return "".join([CROCKFORD_PAIRS[(value >> shift) & 1023] for shift in range(120, -1, -10)])


class WithPrivate(pydantic.BaseModel):
    """A stand-in for MessageHistory's index caches: a pydantic model with a PrivateAttr."""

    public: dict[str, int] = pydantic.Field(default_factory=dict)
    _index: dict[str, int] = pydantic.PrivateAttr(default_factory=dict)


def timings(timer: Timer, options: Options) -> None:
    """The pieces a step is made of, timed alone at the history depth a run ends with."""
    steps = SIZES[options.mode][0]
    depth = 2 * steps
    call = ToolCallPart(tool_call_id="call_" + "A" * 26, tool_name=TOOL_NAME, args={"i": 123})
    assistant = ModelMessage(role="assistant", parts=[call], origin=Origin(kind="model"))
    result = ModelMessage(role="tool", origin=Origin(kind="tool"), parts=[
        ToolResultPart(tool_call_id=call.tool_call_id, tool_name=TOOL_NAME, result=result_text(123))])  # fmt: skip
    history = MessageHistory()
    history.append(ModelMessage.user(USER, origin=Origin(kind="user")))
    for _ in range(steps):
        history.extend([assistant, result])
    messages, grown = history.messages, history.branch()
    run = RunState(run_id="R" * 26, thread_id="T" * 26, agent="bench", step_index=steps,
                   history_revision_id=history.revision_id)  # fmt: skip
    entry: dict[str, Any] = {"id": "E" * 26, "message": result, "created_at": 1}
    revision: dict[str, Any] = {"id": "V" * 26, "parent_id": "P" * 26, "entry_id": "E" * 26, "depth": 3,
                                "created_at": 1}  # fmt: skip
    private, read_private, read_public = WithPrivate(), operator.attrgetter("_index"), operator.attrgetter("public")
    rng = random.Random(7)
    if any(ulid_loop(v) != ulid_pairs(v) for v in (rng.getrandbits(128) for _ in range(1_000))):
        raise RuntimeError("the pair-table id encoding does not match the loop")
    pieces: dict[str, Callable[[], object]] = {
        "assistant message model_dump_json": assistant.model_dump_json,
        "tool message model_dump_json (~1.1 KB)": result.model_dump_json,
        "RunState.model_dump_json": run.model_dump_json,
        "ModelMessage.model_copy(update=origin)": lambda: assistant.model_copy(update={"origin": Origin(kind="model")}),
        "ToolCallPart + ModelMessage construction": lambda: ModelMessage(
            role="assistant", parts=[ToolCallPart(tool_call_id="c", tool_name=TOOL_NAME, args={"i": 1})]),
        "HistoryEntry(...) (validated)": lambda: HistoryEntry(**entry),
        "HistoryEntry.model_construct(...)": lambda: HistoryEntry.model_construct(**entry),
        "HistoryRevision(...) (validated)": lambda: HistoryRevision(**revision),
        "ThreadState(...) (validated)": lambda: ThreadState(thread_id="T" * 26, history_revision_id="V" * 26,
                                                            created_at=1, updated_at=2),
        "Usage + Usage": lambda: run.usage + run.usage,
        f"MessageHistory.append at depth >= {depth}": lambda: grown.append(result),
        "pydantic PrivateAttr read (BaseModel.__getattr__)": lambda: read_private(private),
        "pydantic public field read": lambda: read_public(private),
        f"list(messages) copy at depth {depth}": lambda: list(messages),
        f"sum(m.role == 'assistant') scan at depth {depth}": lambda: sum(1 for m in messages if m.role == "assistant"),
        f"sum(len(m.text)) token estimate at depth {depth}": lambda: sum(len(m.text) for m in messages),
        "ids.new_id (as shipped)": new_id,
        "new_id candidate: 2-character table, 13 rounds (same output)": lambda: ulid_pairs(
            ((time.time_ns() // 1_000_000) << 80) | int.from_bytes(os.urandom(10), "big")),
    }  # fmt: skip
    for name, piece in pieces.items():

        def time_loops(loops: int, piece: Callable[[], object] = piece) -> float:
            started = time.perf_counter()
            for _ in range(loops):
                piece()
            return time.perf_counter() - started

        timer.bench(f"piece: {name}", time_loops)
    settings, fetch = ModelSettings(), repertory_tool(False)
    ctx = ToolContext(call_id=call.tool_call_id, tool_name=TOOL_NAME, run_id=run.run_id, thread_id=run.thread_id)

    async def request(model: ScriptedModel) -> None:
        async for _ in model.request(messages, [], settings):
            pass

    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "Tool.invoke (async tool)": lambda: fetch.invoke({"i": 1}, ctx)
    }
    for script, shown in SCRIPTS.items():
        model = repertory_model(script, steps + 1)
        calls[f"{shown}.request at depth {depth}"] = lambda model=model: request(model)  # type: ignore[misc]
    for name, make in calls.items():

        async def time_async(loops: int, make: Callable[[], Awaitable[object]] = make) -> float:
            started = time.perf_counter()
            for _ in range(loops):
                await make()
            return time.perf_counter() - started

        timer.bench_async(f"piece: {name}", time_async)


# -- the run ----------------------------------------------------------------------------------------------------


async def _langgraph(figures: Figures, options: Options, workdir: Path, steps: int) -> list[Run]:
    """LangGraph's runs (SqliteSaver, then AsyncSqliteSaver in full mode), or a fact saying why not."""
    if not options.peers:
        figures.fact("LangGraph", "not run (--skip-peers)")
        return []
    try:
        runs = [run_langgraph_sync(workdir, steps)]
        if not options.quick:
            runs.append(await run_langgraph_async(workdir, steps))
    except ImportError as exc:
        figures.fact("LangGraph", f"not installed ({exc}); install the 'bench' extra")
        return []
    for run, saver in zip(runs, ("SqliteSaver + graph.invoke", "AsyncSqliteSaver + graph.ainvoke"), strict=False):
        figures.value(f"LangGraph {saver}: steps/s", run.steps_per_s, "steps/s", note="durability async (default)")
        assert run.disk is not None
        figures.size(f"LangGraph {saver}: bytes on disk after the run", run.disk.bytes_on_disk)
        figures.size(f"LangGraph {saver}: WAL bytes before the checkpoint", run.disk.wal_bytes_before_checkpoint)
        figures.size(f"LangGraph {saver}: checkpoint and write blobs", run.facts["checkpoint blobs"]
                     + run.facts["write blobs"])  # fmt: skip
        figures.fact(f"LangGraph {saver}", ", ".join(f"{k} {v}" for k, v in run.facts.items()))
    figures.fact("LangGraph graph", f"{GRAPH}; recursion_limit {2 * steps + 10}")
    return runs


async def scenario(figures: Figures, options: Options) -> None:
    """Every configuration round by round, LangGraph, the ratios, disk by run length, where the time goes."""
    steps, rounds, lengths = SIZES[options.mode]
    steps = options.args.steps or steps
    figures.fact("run", f"{steps:,} tool steps + a reply; tool result {RESULT_CHARS} characters; {rounds} round(s)")
    figures.fact("durability", "repertory: WAL + synchronous=NORMAL (normal) or FULL (full); LangGraph: durability "
                 "'async' (default), SqliteSaver's connection WAL with SQLite's default synchronous")  # fmt: skip
    figures.fact("LangSmith tracing env", str({k: os.environ.get(k) for k in ("LANGSMITH_TRACING",
                                                                              "LANGCHAIN_TRACING_V2")}))  # fmt: skip
    configs = [(d, i, s) for d in DURABILITIES for i in (False, True) for s in SCRIPTS]
    with tempfile.TemporaryDirectory(prefix="repertory-steps-") as tmp:
        workdir = Path(tmp)
        per_step = {i: await count_commits(figures, workdir, i) for i in (False, True)}
        await run_repertory(workdir, min(steps, 50), "normal", False, "list")  # warm imports and caches
        runs: dict[tuple[Durability, bool, str], list[Run]] = {c: [] for c in configs}
        for r in range(rounds):  # configurations alternate, so a noisy neighbour hits all of them alike
            for d, i, s in configs:
                runs[(d, i, s)].append(await run_repertory(workdir, steps, d, i, s, measure_disk=r == 0))
                print(f"  repertory {d:6} {TOOLS[i]:16} {s:10} {runs[(d, i, s)][-1].steps_per_s:8,.0f} steps/s")
        rate = {c: statistics.median(r.steps_per_s for r in rs) for c, rs in runs.items()}
        for (d, i, s), rs in runs.items():
            figures.value(f"steps/s, {d}, {TOOLS[i]}, {SCRIPTS[s]}", [r.steps_per_s for r in rs], "steps/s",
                          note=f"{per_step[i]:g} commits a tool step")  # fmt: skip
        lg = await _langgraph(figures, options, workdir, steps)
        for run, saver in zip(lg, ("SqliteSaver", "AsyncSqliteSaver"), strict=False):
            for (d, i, s), mine in rate.items():
                target = TARGETS[d] if (saver, i, s) == ("SqliteSaver", False, "list") else None
                if s != "list+usage":
                    figures.value(f"steps/s / LangGraph {saver}, {d}, {TOOLS[i]}, {SCRIPTS[s]}", mine / run.steps_per_s,
                                  "x", target=Target(target, at_most=False) if target else None)  # fmt: skip
        if lg and not options.quick and steps > SHORT:
            await short_run(figures, workdir, rounds)
        head = runs[("normal", False, "list")][0]
        assert head.disk is not None
        figures.size(f"repertory: bytes on disk after a {steps:,}-step run", head.disk.bytes_on_disk,
                     note="normal, default @tool, the plain list; db + WAL after wal_checkpoint(TRUNCATE)")  # fmt: skip
        figures.size(
            "repertory: message and run JSON stored", head.facts["message_json"] + head.facts["run_state_json"]
        )
        figures.size("repertory: WAL bytes before the checkpoint", head.disk.wal_bytes_before_checkpoint)
        if lg and lg[0].disk is not None:
            ratio = head.disk.bytes_on_disk / lg[0].disk.bytes_on_disk * 100
            figures.value("bytes on disk after the run, repertory / LangGraph SqliteSaver", ratio, "%",
                          target=Target(1.0))  # fmt: skip
        await bytes_by_run_length(figures, workdir, lengths, steps, head, lg[0] if lg else None)
        for script in ("list", "fn"):
            await profile(figures, workdir, steps, script, 1 / rate[("normal", False, script)])
        for d in DURABILITIES:
            await sql_statements(figures, workdir, steps, d)


async def short_run(figures: Figures, workdir: Path, rounds: int) -> None:
    """The comparison at ``SHORT`` steps: LangGraph's step cost grows with the run."""
    theirs = run_langgraph_sync(workdir, SHORT).steps_per_s
    figures.value(f"LangGraph SqliteSaver + graph.invoke: steps/s, {SHORT}-step run", theirs, "steps/s")
    for d in DURABILITIES:
        for s in ("list", "fn"):
            mine = statistics.median([(await run_repertory(workdir, SHORT, d, False, s)).steps_per_s
                                      for _ in range(rounds)])  # fmt: skip
            name = f"{SHORT}-step run: steps/s{{}}, {d}, default @tool, {SCRIPTS[s]}"
            figures.value(name.format(""), mine, "steps/s")
            figures.value(name.format(" / LangGraph SqliteSaver"), mine / theirs, "x",
                          target=Target(TARGETS[d], at_most=False) if s == "list" else None)  # fmt: skip


async def bytes_by_run_length(figures: Figures, workdir: Path, lengths: Sequence[int], steps: int, head: Run,
                              peer: Run | None) -> None:  # fmt: skip
    """Bytes on disk per step after runs of each length, the empty database taken off (the plot)."""
    db = workdir / "empty.db"
    await (await SqliteSessionStore.open(db)).close()
    empty = {"repertory": disk_usage(db).bytes_on_disk}
    if peer is not None:
        empty["LangGraph + SqliteSaver"] = _empty_langgraph_bytes(workdir)
    figures.fact("empty database", ", ".join(f"{k} {v:,} B" for k, v in empty.items()))
    for n in sorted({*lengths, steps}):
        mine = head if n == steps else await run_repertory(workdir, n, "normal", False, "list", measure_disk=True)
        found = {"repertory": mine}
        if peer is not None:
            found["LangGraph + SqliteSaver"] = peer if n == steps else run_langgraph_sync(workdir, n)
        for who, run in found.items():
            assert run.disk is not None
            figures.size(f"bytes on disk per step, {n:,}-step run, {who}", (run.disk.bytes_on_disk - empty[who]) / n,
                         plot=PLOT, series=who, x=n)  # fmt: skip


def _args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=int, help="tool steps a run (default 1,000; quick 20)")


if __name__ == "__main__":
    main("steps", __doc__, timings=timings, scenario=scenario, add_args=_args, processes=3)
