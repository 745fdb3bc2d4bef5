"""Step benchmark: model steps per second of one session, repertory against LangGraph, on SQLite.

Run ``python -m benchmarks.steps [--quick] [--steps N]``. It prints a table and writes
``benchmarks/results/steps.json`` with the machine, the package versions, the durability of every
figure and the targets the figures are read against. Nothing here asserts a speed (DESIGN.md,
rule 8): a slow figure is a finding, not a failure.

The workload is one session whose model calls one tool per step for N steps (default 1,000) and
then gives a final text reply, so a run makes N + 1 model requests. The tool returns ~1 KB of
text, so every step adds an assistant/tool message pair of ~1.35 KB of JSON. "steps/s" is model
requests per second of wall time for the whole run, from the user message to the final reply.

Why each part is shaped the way it is:

- repertory runs its public API: ``Session.start()`` on an ``Agent`` whose model is a
  ``ScriptedModel`` with no delay, against ``SqliteSessionStore.open(path, durability=...)``.
  The headline script is the plain list of steps a user writes. ``ScriptedModel`` then estimates
  usage and finds its step by scanning the whole conversation on every request, work that grows
  with the history and that a real model adapter does not do in the caller's process, so two
  variants of the same script are also timed: with ``"usage"`` given (no token-estimate scan) and
  as a step function (no scan at all), which leaves the engine's own cost. The tool is the default ``@tool``
  (not idempotent: the assistant message is committed before the tool runs, then the step is
  committed, so two commits per step, like LangGraph's two checkpoints per step) and, as a variant,
  ``@tool(idempotent=True)`` (one commit per step).
- LangGraph runs the way its users run it: a ``StateGraph(MessagesState)`` (``add_messages``
  reducer), a model node that returns the scripted ``AIMessage`` tool call (a plain function node,
  cheaper than any fake chat model, so the comparison leans LangGraph's way), the prebuilt
  ``ToolNode`` and ``tools_condition``, compiled with a checkpointer so every super-step is
  checkpointed, with LangGraph's defaults: ``durability`` not passed (so ``"async"``), the
  checkpointer as ``from_conn_string`` builds it (WAL, SQLite's default ``synchronous``).
  The headline is the sync ``SqliteSaver`` with ``graph.invoke()``, the path LangGraph's
  persistence docs show for SQLite; ``AsyncSqliteSaver`` with ``graph.ainvoke()`` is timed too.
  ``recursion_limit`` is raised to 2N + 10 (two super-steps per step).
- Disk is read after ``PRAGMA wal_checkpoint(TRUNCATE)`` on a separate connection: database plus
  WAL file (the ``-shm`` index is reported apart; it is not data).
- cProfile runs on separate runs of repertory (never on the timed ones). Self time is grouped
  into categories by the file a function lives in; builtins and generic helpers (``hasattr``,
  ``str.join``, ``ModelMessage.text``, ``contextlib``) are charged to their callers in proportion
  to the time each caller spent in them, so the categories add up to the profiled total. The
  profiler slows Python calls but not the C inside sqlite3, so the table gives the raw profiled
  microseconds, the share, and an estimate that keeps SQLite's time and scales the Python
  categories down to the unprofiled wall time.
- The SQL of a run is timed statement by statement on a separate run (the store's writer
  connection wrapped), and the WAL pages one commit writes are counted on short runs.
- A few pieces are then timed alone, with no profiler, to put microseconds on the suggestions.
- The repertory tree may move while this runs; the git commit is read before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import platform
import pstats
import random
import sqlite3
import statistics
import string
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import pydantic

from benchmarks._report import git_state
from repertory import Agent, ModelMessage, Origin, RunState, Session, ThreadState, Tool, ToolContext, tool
from repertory.core.history import HistoryEntry, HistoryRevision, MessageHistory
from repertory.core.ids import new_id
from repertory.core.messages import ToolCallPart, ToolResultPart
from repertory.storage.sqlite.store import Durability, SqliteSessionStore
from repertory.testing import ScriptedModel

__all__ = ["main", "run_suite"]

RESULTS = Path(__file__).resolve().parent / "results" / "steps.json"
DEFAULT_STEPS = 1_000
QUICK_STEPS = 100
RESULT_CHARS = 1_000
FINAL_TEXT = "All records fetched."
USER_TEXT = "Fetch every record, one tool call at a time."
TARGET_NORMAL_RATIO = 10.0
TARGET_FULL_RATIO = 3.0
TARGET_DISK_RATIO = 0.01
SCRIPTS = ("list", "list+usage", "fn")
SCRIPT_LABELS = {
    "list": "ScriptedModel(list)",
    "list+usage": "ScriptedModel(list, usage given)",
    "fn": "ScriptedModel(step function)",
}
HEADLINE_SCRIPT = "list"
HEADLINE_IDEMPOTENT = False
TOOL_NAME = "fetch"
_FILLER = "".join(random.Random(1).choices(string.ascii_letters + " ", k=RESULT_CHARS))


# -- workload ---------------------------------------------------------------------------------------


def result_text(i: int) -> str:
    """The tool's reply for record ``i``: exactly ``RESULT_CHARS`` characters, different every step."""
    prefix = f"record {i:06d}: "
    return prefix + _FILLER[len(prefix) :]


def call_id() -> str:
    """A tool-call id shaped like ScriptedModel's (``call_`` + 26 characters), for LangGraph."""
    return "call_" + uuid.uuid4().hex[:26]


def repertory_tool(idempotent: bool) -> Tool:
    """The trivial tool: validates one int argument and returns ~1 KB of text."""

    @tool(name=TOOL_NAME, idempotent=idempotent)
    async def fetch(i: int) -> str:
        """Fetch record ``i``."""
        return result_text(i)

    return fetch


def repertory_model(script: str, steps: int) -> ScriptedModel:
    """The ScriptedModel for one run: N tool calls, then the final text."""
    usage = {"input_tokens": 100, "output_tokens": 20}
    if script == "list":
        plain: list[dict[str, Any]] = [{"tool": TOOL_NAME, "args": {"i": k}} for k in range(steps)]
        return ScriptedModel([*plain, {"text": FINAL_TEXT}])
    with_usage = [{"tool": TOOL_NAME, "args": {"i": k}, "usage": usage} for k in range(steps)]
    with_usage.append({"text": FINAL_TEXT, "usage": usage})
    if script == "list+usage":
        return ScriptedModel(with_usage)

    def step(messages: list[ModelMessage], tools: list[Any]) -> dict[str, Any]:
        # No instructions, so the request is the user message then one pair per finished step.
        return with_usage[(len(messages) - 1) // 2]

    return ScriptedModel(step)


# -- disk -------------------------------------------------------------------------------------------


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def disk_usage(db: Path) -> dict[str, int]:
    """Bytes of the database and its WAL, before and after a TRUNCATE checkpoint on a fresh connection."""
    wal, shm = Path(f"{db}-wal"), Path(f"{db}-shm")
    before = {"db_bytes_before_checkpoint": _size(db), "wal_bytes_before_checkpoint": _size(wal)}
    conn = sqlite3.connect(db)
    try:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        conn.close()
    return {
        **before,
        "checkpoint_busy": int(busy),
        "db_bytes": _size(db),
        "wal_bytes": _size(wal),
        "shm_bytes": _size(shm),
        "bytes_on_disk": _size(db) + _size(wal),
    }


def _scalar(db: Path, sql: str) -> Any:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchone()
    finally:
        conn.close()


# -- repertory --------------------------------------------------------------------------------------


@dataclass
class RepertoryRun:
    """One timed repertory run."""

    durability: str
    idempotent: bool
    script: str
    steps: int
    seconds: float
    steps_per_s: float
    us_per_step: float
    disk: dict[str, Any] = field(default_factory=dict)


async def run_repertory(
    workdir: Path,
    steps: int,
    durability: Durability,
    idempotent: bool,
    script: str,
    profile: cProfile.Profile | None = None,
    measure_disk: bool = False,
) -> RepertoryRun:
    """One session, one run of ``steps`` tool steps and a final reply, on a fresh database file."""
    db = workdir / f"repertory-{uuid.uuid4().hex[:8]}.db"
    store = await SqliteSessionStore.open(db, durability=durability)
    try:
        agent = Agent(
            name="bench",
            model=repertory_model(script, steps),
            tools=[repertory_tool(idempotent)],
            max_steps=steps + 1,
        )
        session = Session(store=store, agent=agent)
        gc.collect()
        start = time.perf_counter()
        if profile is not None:
            profile.enable()
        result = await session.start(USER_TEXT)
        if profile is not None:
            profile.disable()
        seconds = time.perf_counter() - start
        if result.status != "done" or result.state.step_index != steps + 1 or result.text != FINAL_TEXT:
            raise RuntimeError(f"repertory run ended wrongly: {result.status} at step {result.state.step_index}")
        disk: dict[str, Any] = {}
        if measure_disk:
            disk = disk_usage(db)
            count, payload = _scalar(db, "SELECT count(*), sum(length(message)) FROM history_entries")
            (state_bytes,) = _scalar(db, "SELECT sum(length(state)) FROM runs")
            disk.update(messages=count, message_json_bytes=payload, run_state_json_bytes=state_bytes)
            if count != 2 * steps + 2:
                raise RuntimeError(f"repertory stored {count} messages, expected {2 * steps + 2}")
    finally:
        await store.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
    return RepertoryRun(
        durability, idempotent, script, steps, seconds, (steps + 1) / seconds, seconds * 1e6 / (steps + 1), disk
    )


async def count_commits(workdir: Path, idempotent: bool) -> dict[str, float]:
    """Commits and WAL pages per step, counted on short untimed runs (a wrapper would perturb timed ones).

    The WAL is truncated before the run and read (``wal_checkpoint(PASSIVE)`` reports the frames in
    the log) after it; the runs are short enough that SQLite's auto-checkpoint (1,000 pages) never
    restarts the log, so frames / commits is the pages one commit writes.
    """
    counts: dict[int, tuple[int, int]] = {}
    for steps in (10, 30):
        db = workdir / f"count-{uuid.uuid4().hex[:8]}.db"
        store = await SqliteSessionStore.open(db)
        calls = 0
        inner = store.commit_session

        async def counted(inner: Any = inner, **kwargs: Any) -> None:
            nonlocal calls
            calls += 1
            await inner(**kwargs)

        store.commit_session = counted  # type: ignore[method-assign]
        probe = sqlite3.connect(db)
        try:
            probe.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            agent = Agent(
                name="count",
                model=repertory_model("fn", steps),
                tools=[repertory_tool(idempotent)],
                max_steps=steps + 1,
            )
            await Session(store=store, agent=agent).start(USER_TEXT)
            _, frames, _ = probe.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        finally:
            probe.close()
            await store.close()
        counts[steps] = (calls, int(frames))
    per_step = (counts[30][0] - counts[10][0]) / 20
    pages = (counts[30][1] - counts[10][1]) / (counts[30][0] - counts[10][0])
    return {
        "commits_per_tool_step": per_step,
        "fixed_commits_per_run": counts[10][0] - per_step * 10,
        "wal_pages_per_commit": pages,
        "wal_pages_per_tool_step": pages * per_step,
    }


# -- LangGraph --------------------------------------------------------------------------------------


@dataclass
class LangGraphRun:
    """One timed LangGraph run."""

    saver: str
    invoke: str
    steps: int
    seconds: float
    steps_per_s: float
    us_per_step: float
    sqlite_synchronous: int | None
    journal_mode: str | None
    durability: str = "async (LangGraph's default; not passed)"
    checkpoints: int = 0
    checkpoint_blob_bytes: int = 0
    last_checkpoint_blob_bytes: int = 0
    writes: int = 0
    write_blob_bytes: int = 0
    disk: dict[str, Any] = field(default_factory=dict)


def _langgraph_builder(steps: int, is_async: bool) -> Any:
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


def _langgraph_inputs(steps: int) -> tuple[dict[str, Any], dict[str, Any]]:
    from langchain_core.messages import HumanMessage

    config = {"configurable": {"thread_id": "bench"}, "recursion_limit": 2 * steps + 10}
    return {"messages": [HumanMessage(content=USER_TEXT)]}, config


def _check_langgraph(out: dict[str, Any], steps: int) -> None:
    messages = out["messages"]
    if len(messages) != 2 * steps + 2 or messages[-1].content != FINAL_TEXT:
        raise RuntimeError(f"LangGraph run ended wrongly: {len(messages)} messages")


def _langgraph_db_facts(db: Path) -> dict[str, Any]:
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
            graph = _langgraph_builder(steps, is_async=False).compile(checkpointer=saver)
            inputs, config = _langgraph_inputs(steps)
            gc.collect()
            start = time.perf_counter()
            out = graph.invoke(inputs, config)
            seconds = time.perf_counter() - start
            _check_langgraph(out, steps)
            synchronous = saver.conn.execute("PRAGMA synchronous").fetchone()[0]
            journal = saver.conn.execute("PRAGMA journal_mode").fetchone()[0]
            disk = disk_usage(db)
        facts = _langgraph_db_facts(db)
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
    return LangGraphRun(
        "SqliteSaver",
        "graph.invoke",
        steps,
        seconds,
        (steps + 1) / seconds,
        seconds * 1e6 / (steps + 1),
        synchronous,
        journal,
        disk=disk,
        **facts,
    )


async def run_langgraph_async(workdir: Path, steps: int) -> LangGraphRun:
    """``AsyncSqliteSaver.from_conn_string`` (aiosqlite) + ``graph.ainvoke``."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    db = workdir / f"langgraph-async-{uuid.uuid4().hex[:8]}.db"
    try:
        async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:
            graph = _langgraph_builder(steps, is_async=True).compile(checkpointer=saver)
            inputs, config = _langgraph_inputs(steps)
            gc.collect()
            start = time.perf_counter()
            out = await graph.ainvoke(inputs, config)
            seconds = time.perf_counter() - start
            _check_langgraph(out, steps)
            async with saver.conn.execute("PRAGMA synchronous") as cur:
                row = await cur.fetchone()
                synchronous = None if row is None else row[0]
            async with saver.conn.execute("PRAGMA journal_mode") as cur:
                row = await cur.fetchone()
                journal = None if row is None else row[0]
            disk = disk_usage(db)
        facts = _langgraph_db_facts(db)
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
    return LangGraphRun(
        "AsyncSqliteSaver",
        "graph.ainvoke",
        steps,
        seconds,
        (steps + 1) / seconds,
        seconds * 1e6 / (steps + 1),
        synchronous,
        journal,
        disk=disk,
        **facts,
    )


# -- profile ----------------------------------------------------------------------------------------

_Key = tuple[str, int, str]


def _label(key: _Key) -> str:
    file, line, name = key
    if file == "~":
        return name
    path = file.replace("\\", "/")
    for marker in ("/site-packages/", "/work/main/", "/lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{path}:{line}({name})"


def _direct_category(key: _Key) -> str | None:
    """The category a function's own time belongs to, or None to charge it to its callers."""
    file, _, name = key
    if file == "~":
        if "sqlite3." in name:
            return "sqlite execute"
        if "SchemaSerializer" in name or "to_jsonable_python" in name or name.endswith("to_json>"):
            return "pydantic serialize"
        if "SchemaValidator" in name or "pydantic_core" in name:
            return "pydantic validate/construct/copy"
        return None
    path = file.replace("\\", "/")
    if "/pydantic/" in path or "/pydantic_core/" in path:
        if name == "__getattr__":
            return "pydantic private-attr reads"
        if name in ("model_dump_json", "model_dump"):
            return "pydantic serialize"
        return "pydantic validate/construct/copy"
    if path.endswith("repertory/runtime/testing.py"):
        return "ScriptedModel"
    if path.endswith("repertory/runtime/history.py"):
        return "history (MessageHistory)"
    if path.endswith(("repertory/runtime/tools.py", "repertory/runtime/_calls.py")) or "/asyncio/" in path:
        return "tools + asyncio"
    if path == __file__ or path.endswith("benchmarks/steps.py"):
        return "tools + asyncio"  # the benchmark's tool body and result_text
    if "/repertory/storage/" in path:
        return "store Python (plan, rows, guards)"
    if path.endswith("repertory/runtime/ids.py"):
        return "ids + clock"
    if "/repertory/runtime/" in path and not path.endswith("messages.py"):
        return "step loop (Drive, Session)"
    return None


def _categories(stats: dict[_Key, Any]) -> dict[str, float]:
    """Self time per category; generic functions are charged to callers by the time each spent in them."""
    memo: dict[_Key, dict[str, float]] = {}

    def shares(key: _Key, visiting: frozenset[_Key]) -> dict[str, float]:
        if key in memo:
            return memo[key]
        direct = _direct_category(key)
        if direct is not None:
            out = {direct: 1.0}
        else:
            callers: dict[_Key, tuple[Any, ...]] = stats[key][4] if key in stats else {}
            weights = {c: float(edge[2]) for c, edge in callers.items() if c not in visiting}
            total = sum(weights.values())
            if total <= 0:
                weights = {c: float(edge[0]) for c, edge in callers.items() if c not in visiting}
                total = sum(weights.values())
            out = {}
            if total <= 0:
                out = {"other": 1.0}
            else:
                for caller, weight in weights.items():
                    for cat, share in shares(caller, visiting | {key}).items():
                        out[cat] = out.get(cat, 0.0) + share * weight / total
        if not visiting:
            memo[key] = out
        return out

    seconds: dict[str, float] = {}
    for key, (_, _, tottime, _, _) in stats.items():
        for cat, share in shares(key, frozenset()).items():
            seconds[cat] = seconds.get(cat, 0.0) + tottime * share
    return seconds


# Inclusive time of the pieces of a step: (label, file suffix, function name).
_INCLUSIVE: list[tuple[str, str, str]] = [
    ("Drive.request (one model request, incl. stream)", "repertory/runtime/_loop.py", "request"),
    ("  ScriptedModel.request (async generator)", "repertory/runtime/testing.py", "request"),
    ("  Drive.request_messages (list copy)", "repertory/runtime/_loop.py", "request_messages"),
    ("Drive.settle_calls (find + run calls, append result)", "repertory/runtime/_loop.py", "settle_calls"),
    ("  Tool.invoke (validate args, run, to_jsonable)", "repertory/runtime/tools.py", "invoke"),
    ("Drive.append -> MessageHistory.append", "repertory/runtime/history.py", "append"),
    ("Drive.commit (one checkpoint)", "repertory/runtime/_loop.py", "commit"),
    ("  SqliteSessionStore.commit_session", "repertory/storage/sqlite.py", "commit_session"),
    ("    plan_commit (walk back, delta)", "repertory/storage/_commit.py", "plan_commit"),
    ("    _run_row (RunState.model_dump_json)", "repertory/storage/sqlite.py", "_run_row"),
    ("BaseModel.model_dump_json (all callers)", "pydantic/main.py", "model_dump_json"),
    ("BaseModel.model_copy (all callers)", "pydantic/main.py", "model_copy"),
    ("BaseModel.__getattr__ (private attrs, all callers)", "pydantic/main.py", "__getattr__"),
    ("ids.new_id", "repertory/runtime/ids.py", "new_id"),
]


_UNSCALED = "sqlite execute"


def profile_report(profile: cProfile.Profile, steps: int, wall_us_per_step: float, top: int = 20) -> dict[str, Any]:
    """Top functions by self time, self time by category, and inclusive time of the step's pieces."""
    stats: dict[_Key, Any] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    requests = steps + 1
    total = sum(v[2] for v in stats.values())
    profiled_us = total * 1e6 / requests
    scale = wall_us_per_step / profiled_us if profiled_us else 0.0
    ordered = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    top_rows = [
        {
            "function": _label(key),
            "ncalls": int(v[1]),
            "calls_per_step": v[1] / requests,
            "tottime_s": v[2],
            "tottime_us_per_step": v[2] * 1e6 / requests,
            "cumtime_us_per_step": v[3] * 1e6 / requests,
        }
        for key, v in ordered
    ]
    cats = _categories(stats)
    # The profiler slows Python calls, not the C inside sqlite3: keep SQLite's time as measured and
    # scale the Python categories by what is left of the unprofiled wall time.
    c_us = cats.get(_UNSCALED, 0.0) * 1e6 / requests
    python_scale = (wall_us_per_step - c_us) / (profiled_us - c_us) if profiled_us > c_us else 0.0
    categories = {
        cat: {
            "share": sec / total if total else 0.0,
            "profiled_us_per_step": sec * 1e6 / requests,
            "est_unprofiled_us_per_step": sec * 1e6 / requests * (1.0 if cat == _UNSCALED else python_scale),
        }
        for cat, sec in sorted(cats.items(), key=lambda kv: kv[1], reverse=True)
    }
    inclusive = []
    for label, suffix, name in _INCLUSIVE:
        found = [(k, v) for k, v in stats.items() if k[2] == name and k[0].replace("\\", "/").endswith(suffix)]
        if not found:
            continue
        calls = sum(v[1] for _, v in found)
        cum = sum(v[3] for _, v in found)
        inclusive.append(
            {"piece": label, "calls_per_step": calls / requests, "profiled_us_per_step": cum * 1e6 / requests}
        )
    return {
        "model_requests": requests,
        "profiled_us_per_step": profiled_us,
        "wall_us_per_step_unprofiled": wall_us_per_step,
        "profiler_inflation": 1 / scale if scale else None,
        "python_profiler_inflation": 1 / python_scale if python_scale else None,
        "top_by_tottime": top_rows,
        "categories": categories,
        "inclusive": inclusive,
    }


# -- the statements of a commit ---------------------------------------------------------------------


class _TimedConnection:
    """Stands in for the store's writer connection and times every statement by kind (diagnostic only)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def _record(self, kind: str, started: float) -> None:
        self.seconds[kind] = self.seconds.get(kind, 0.0) + time.perf_counter() - started
        self.calls[kind] = self.calls.get(kind, 0) + 1

    @staticmethod
    def _kind(sql: str, many: bool) -> str:
        words = sql.split()
        head = " ".join(words[:5]) if words[:1] == ["INSERT"] else " ".join(words[:4])
        return ("executemany " if many else "") + head

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        started = time.perf_counter()
        try:
            return self._conn.execute(sql, params)
        finally:
            self._record(self._kind(sql, False), started)

    def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:
        started = time.perf_counter()
        try:
            return self._conn.executemany(sql, rows)
        finally:
            self._record(self._kind(sql, True), started)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


async def sql_breakdown(workdir: Path, steps: int, durability: Durability) -> dict[str, Any] | None:
    """Time each SQL statement kind of a run by wrapping the store's private writer connection.

    This reaches into ``SqliteSessionStore._writer``; if the store is reshaped, the section is skipped.
    The wrapper adds a Python call per statement, so the run is not one of the timed ones.
    """
    db = workdir / f"sql-{uuid.uuid4().hex[:8]}.db"
    store = await SqliteSessionStore.open(db, durability=durability)
    writer = getattr(store, "_writer", None)
    if not isinstance(writer, sqlite3.Connection):
        await store.close()
        return None
    timed = _TimedConnection(writer)
    store._writer = timed  # type: ignore[assignment]
    try:
        agent = Agent(
            name="sql", model=repertory_model("fn", steps), tools=[repertory_tool(False)], max_steps=steps + 1
        )
        await Session(store=store, agent=agent).start(USER_TEXT)
    finally:
        store._writer = writer
        await store.close()
    requests = steps + 1
    rows = {
        kind: {
            "calls_per_step": timed.calls[kind] / requests,
            "us_per_call": sec * 1e6 / timed.calls[kind],
            "us_per_step": sec * 1e6 / requests,
        }
        for kind, sec in sorted(timed.seconds.items(), key=lambda kv: kv[1], reverse=True)
    }
    return {"durability": durability, "tool": "default @tool", "script": "fn", "statements": rows}


# -- pieces timed alone -----------------------------------------------------------------------------


def _per_call_us(fn: Callable[[], object], calls: int) -> float:
    fn()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


async def _async_per_call_us(fn: Callable[[], Any], calls: int) -> float:
    await fn()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            await fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_CROCKFORD_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]
_PAIR_SHIFTS = range(120, -1, -10)


def _ulid_loop(value: int) -> str:
    """The encoding ``repertory.core.ids.new_id`` uses today: 26 rounds of a Python loop."""
    chars = [""] * 26
    for i in range(25, -1, -1):
        chars[i] = _CROCKFORD[value & 31]
        value >>= 5
    return "".join(chars)


def _ulid_pairs(value: int) -> str:
    """The same 26 characters, two at a time from a 1,024-entry table: 13 rounds instead of 26."""
    return "".join([_CROCKFORD_PAIRS[(value >> shift) & 1023] for shift in _PAIR_SHIFTS])


def _candidate_new_id() -> str:
    value = ((time.time_ns() // 1_000_000) << 80) | int.from_bytes(os.urandom(10), "big")
    return _ulid_pairs(value)


class _WithPrivate(pydantic.BaseModel):
    """A stand-in for MessageHistory's index caches: a pydantic model with a PrivateAttr."""

    public: dict[str, int] = pydantic.Field(default_factory=dict)
    _index: dict[str, int] = pydantic.PrivateAttr(default_factory=dict)


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
    private = _WithPrivate()
    costs: dict[str, float] = {}
    n = 2_000
    costs["assistant message model_dump_json"] = _per_call_us(assistant.model_dump_json, n)
    costs["tool message model_dump_json (~1.1 KB)"] = _per_call_us(result.model_dump_json, n)
    costs["RunState.model_dump_json"] = _per_call_us(run.model_dump_json, n)
    costs["ModelMessage.model_copy(update=origin)"] = _per_call_us(
        lambda: assistant.model_copy(update={"origin": Origin(kind="model")}), n
    )
    costs["ToolCallPart + ModelMessage construction"] = _per_call_us(
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
    costs["HistoryEntry(...) (validated)"] = _per_call_us(lambda: HistoryEntry(**entry_args), n)
    costs["HistoryEntry.model_construct(...)"] = _per_call_us(lambda: HistoryEntry.model_construct(**entry_args), n)
    costs["HistoryRevision(...) (validated)"] = _per_call_us(lambda: HistoryRevision(**rev_args), n)
    costs["ThreadState(...) (validated)"] = _per_call_us(
        lambda: ThreadState(thread_id="T" * 26, history_revision_id="V" * 26, created_at=1, updated_at=2), n
    )
    costs["Usage + Usage"] = _per_call_us(lambda: run.usage + run.usage, n)
    costs[f"MessageHistory.append at depth >= {depth}"] = _per_call_us(lambda: grown.append(result), n)
    costs["pydantic PrivateAttr read (BaseModel.__getattr__)"] = _per_call_us(lambda: private._index, 20_000)
    costs["pydantic public field read"] = _per_call_us(lambda: private.public, 20_000)
    costs[f"list(messages) copy at depth {depth}"] = _per_call_us(lambda: list(messages), n)
    costs[f"sum(m.role == 'assistant') scan at depth {depth}"] = _per_call_us(
        lambda: sum(1 for m in messages if m.role == "assistant"), 200
    )
    costs[f"sum(len(m.text)) token estimate at depth {depth}"] = _per_call_us(
        lambda: sum(len(m.text) for m in messages), 200
    )
    for script in SCRIPTS:
        model = repertory_model(script, steps + 1)

        async def ask(model: ScriptedModel = model) -> None:
            async for _ in model.request(messages, [], None):  # type: ignore[arg-type]
                pass

        costs[f"{SCRIPT_LABELS[script]}.request at depth {depth}"] = await _async_per_call_us(ask, 200)
    rng = random.Random(7)
    for _ in range(1_000):
        value = rng.getrandbits(128)
        if _ulid_loop(value) != _ulid_pairs(value):
            raise RuntimeError("the pair-table id encoding does not match the loop")
    costs["ids.new_id (as shipped)"] = _per_call_us(new_id, n)
    costs["new_id candidate: 2-character table, 13 rounds (same output)"] = _per_call_us(_candidate_new_id, n)
    costs["Tool.invoke (async tool)"] = await _async_per_call_us(lambda: fetch.invoke({"i": 1}, ctx), n)
    return costs


# -- bytes per step by run length -------------------------------------------------------------------


async def _empty_bytes(workdir: Path, peers: bool) -> dict[str, int]:
    """Bytes of an empty database of each side (schema only), taken off every run-length figure."""
    db = workdir / f"empty-{uuid.uuid4().hex[:8]}.db"
    await (await SqliteSessionStore.open(db)).close()
    out = {"repertory": disk_usage(db)["bytes_on_disk"]}
    if peers:
        from langgraph.checkpoint.sqlite import SqliteSaver

        lg = workdir / f"empty-lg-{uuid.uuid4().hex[:8]}.db"
        with SqliteSaver.from_conn_string(str(lg)) as saver:
            saver.setup()
        out["langgraph"] = disk_usage(lg)["bytes_on_disk"]
    return out


async def bytes_by_run_length(
    workdir: Path, lengths: Sequence[int], peers: bool, known: dict[int, dict[str, int]]
) -> dict[str, Any]:
    """Bytes on disk per step after runs of each length: flat for repertory, growing for LangGraph.

    Each figure is (database + WAL after a TRUNCATE checkpoint, minus the empty database) / steps.
    ``known`` holds bytes already measured by the timed runs (length -> {"repertory": b,
    "langgraph": b}) so the longest, costliest LangGraph run is not repeated.
    """
    empty = await _empty_bytes(workdir, peers)
    rows = []
    for steps in sorted({*lengths, *known}):
        measured = dict(known.get(steps, {}))
        if "repertory" not in measured:
            r = await run_repertory(workdir, steps, "normal", HEADLINE_IDEMPOTENT, HEADLINE_SCRIPT, measure_disk=True)
            measured["repertory"] = r.disk["bytes_on_disk"]
        if peers and "langgraph" not in measured:
            measured["langgraph"] = run_langgraph_sync(workdir, steps).disk["bytes_on_disk"]
        entry: dict[str, Any] = {"steps": steps}
        for who, total in measured.items():
            entry[f"{who}_bytes_on_disk"] = total
            entry[f"{who}_bytes_per_step"] = (total - empty[who]) / steps
        rows.append(entry)
    return {
        "empty_database_bytes": empty,
        "repertory_config": f"durability normal, default @tool, {SCRIPT_LABELS[HEADLINE_SCRIPT]}",
        "langgraph_config": "SqliteSaver + graph.invoke" if peers else None,
        "rows": rows,
    }


# -- report -----------------------------------------------------------------------------------------


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    """What the figures were measured on; the commit is read-only git, for telling runs apart."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "cpu_count": os.cpu_count(),
        "sqlite_version": sqlite3.sqlite_version,
        "versions": {
            d: _version(d)
            for d in (
                "repertory",
                "pydantic",
                "pydantic-core",
                "langgraph",
                "langgraph-checkpoint",
                "langgraph-checkpoint-sqlite",
                "langgraph-prebuilt",
                "langchain-core",
                "aiosqlite",
                "ormsgpack",
            )
        },
        "langsmith_tracing_env": {k: os.environ.get(k) for k in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2")},
        "load_average_before": list(os.getloadavg()),
    }
    info.update(git_state())
    return info


def _table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join("-" * w for w in widths)
    out = [title, "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)), line]
    for r in rows:
        out.append(
            "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        )
    return "\n".join(out)


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"


def _mb(n: int) -> str:
    return f"{n / 1e6:,.2f} MB"


def render(report: dict[str, Any]) -> str:
    """The human-readable tables."""
    steps = report["steps"]
    parts = [
        f"Step benchmark ({report['mode']}): {steps:,} tool steps + 1 final reply = {steps + 1:,} model "
        f"requests per run, ~{report['message_pair_json_bytes']:,} B of message JSON per step"
    ]
    machine = report["machine"]
    if machine.get("git_commit") != machine.get("git_commit_after") or machine.get("repertory_tree_dirty_after"):
        parts.append(
            f"NOTE: repertory/ changed while this ran (commit {machine.get('git_commit')}, "
            f"dirty at start: {machine.get('repertory_tree_dirty')}; after: {machine.get('git_commit_after')}, "
            f"dirty: {machine.get('repertory_tree_dirty_after')}). The figures are for the code imported at start."
        )
    commits = report["repertory"]["commits"]
    rows = []
    for r in report["repertory"]["summary"]:
        per_step = commits["idempotent" if r["idempotent"] else "default"]["commits_per_tool_step"]
        rows.append(
            [
                f"repertory {SCRIPT_LABELS[r['script']]}",
                r["durability"],
                "idempotent" if r["idempotent"] else "default @tool",
                f"{per_step:g}",
                f"{r['steps_per_s']:,.0f}",
                f"{r['us_per_step']:,.0f}",
                str(r["runs"]),
            ]
        )
    for g in report["langgraph"]["runs"]:
        rows.append(
            [
                f"LangGraph {g['saver']} + {g['invoke']}",
                "async (default)",
                "ToolNode",
                "2 ckpt",
                f"{g['steps_per_s']:,.1f}",
                f"{g['us_per_step']:,.0f}",
                "1",
            ]
        )
    parts.append(
        _table(
            "\nThroughput (median of runs; steps/s = model requests per second)",
            ["who", "durability", "tool", "commits/step", "steps/s", "us/step", "runs"],
            rows,
        )
    )
    parts.append(
        "  repertory WAL pages written per commit: "
        + ", ".join(
            f"{name} @tool {c['wal_pages_per_commit']:.1f} ({c['wal_pages_per_tool_step']:.1f} per step)"
            for name, c in commits.items()
        )
    )
    lg = report["langgraph"]["runs"]
    if lg:
        g0 = lg[0]
        parts.append(
            f"  LangGraph SQLite settings: journal_mode={g0['journal_mode']}, "
            f"synchronous={g0['sqlite_synchronous']} (2 = FULL, SQLite's default), durability {g0['durability']}"
        )
    ratios = report["ratios"]
    if ratios:
        parts.append(
            _table(
                f"\nRatios against LangGraph {ratios['langgraph_reference']} "
                f"({ratios['langgraph_steps_per_s']:,.1f} steps/s)",
                ["repertory config", "steps/s", "ratio", "target", "meets"],
                [
                    [
                        r["label"],
                        f"{r['steps_per_s']:,.0f}",
                        f"{r['ratio']:.1f}x",
                        f">= {r['target']:g}x" if r["target"] else "-",
                        _yes(r["meets"]) if r["target"] else "-",
                    ]
                    for r in ratios["rows"]
                ],
            )
        )
    short = report.get("short_run")
    if short:
        lg = short["langgraph"]
        parts.append(
            _table(
                f"\nThe same at {short['steps']} steps (LangGraph SqliteSaver {lg['steps_per_s']:,.1f} steps/s; "
                f"its checkpoints hold the whole history, so its step cost grows with the run)",
                ["repertory config", "steps/s", "ratio", "target", "meets"],
                [
                    [
                        r["label"],
                        f"{r['steps_per_s']:,.0f}",
                        f"{r['ratio']:.1f}x",
                        f">= {r['target']:g}x" if r["target"] else "-",
                        _yes(r["meets"]) if r["target"] else "-",
                    ]
                    for r in short["rows"]
                ],
            )
        )
    disk = report["disk"]
    parts.append(
        _table(
            f"\nBytes on disk after one {steps:,}-step run (db + WAL after wal_checkpoint(TRUNCATE); -shm not counted)",
            ["who", "db + wal", "payload", "wal before ckpt", "per step"],
            [
                [
                    d["who"],
                    _mb(d["bytes_on_disk"]),
                    _mb(d["payload_bytes"]),
                    _mb(d["wal_bytes_before_checkpoint"]),
                    f"{d['bytes_on_disk'] / steps:,.0f} B",
                ]
                for d in disk["rows"]
            ],
        )
    )
    if disk.get("ratio") is not None:
        parts.append(
            f"  repertory / LangGraph = {disk['ratio']:.3%} (target <= {TARGET_DISK_RATIO:.0%}): {_yes(disk['meets'])}"
        )
    by_length = report.get("bytes_by_run_length")
    if by_length:
        parts.append(
            _table(
                "\nBytes on disk per step by run length (the empty database taken off)",
                ["steps", "repertory B/step", "LangGraph B/step"],
                [
                    [
                        f"{r['steps']:,}",
                        f"{r['repertory_bytes_per_step']:,.0f}",
                        f"{r['langgraph_bytes_per_step']:,.0f}" if "langgraph_bytes_per_step" in r else "-",
                    ]
                    for r in by_length["rows"]
                ],
            )
        )
    for prof in report["profiles"]:
        p = prof["report"]
        parts.append(
            _table(
                f"\ncProfile of repertory, {prof['label']}: {p['profiled_us_per_step']:,.0f} us/step profiled, "
                f"{p['wall_us_per_step_unprofiled']:,.0f} us/step unprofiled "
                f"(x{p['profiler_inflation']:.2f}); top 20 by tottime",
                ["function", "calls/step", "tottime us/step", "cumtime us/step"],
                [
                    [
                        t["function"][:78],
                        f"{t['calls_per_step']:.1f}",
                        f"{t['tottime_us_per_step']:.1f}",
                        f"{t['cumtime_us_per_step']:.1f}",
                    ]
                    for t in p["top_by_tottime"]
                ],
            )
        )
        parts.append(
            _table(
                "\n  Self time by category (builtins charged to their callers; the estimate keeps sqlite's C time "
                f"and divides Python by x{p['python_profiler_inflation'] or 0:.2f})",
                ["category", "share", "profiled us/step", "~unprofiled us/step"],
                [
                    [
                        k,
                        f"{v['share']:.0%}",
                        f"{v['profiled_us_per_step']:.1f}",
                        f"{v['est_unprofiled_us_per_step']:.1f}",
                    ]
                    for k, v in p["categories"].items()
                ],
            )
        )
        parts.append(
            _table(
                "\n  Inclusive time of the step's pieces (profiled)",
                ["piece", "calls/step", "profiled us/step"],
                [
                    [i["piece"], f"{i['calls_per_step']:.2f}", f"{i['profiled_us_per_step']:.1f}"]
                    for i in p["inclusive"]
                ],
            )
        )
    for sql in report["sql_statements"]:
        parts.append(
            _table(
                f"\nSQL statements per step, durability {sql['durability']}, default @tool, "
                f"{SCRIPT_LABELS[sql['script']]} (writer connection wrapped; not a timed run)",
                ["statement", "calls/step", "us/call", "us/step"],
                [
                    [k[:60], f"{v['calls_per_step']:.2f}", f"{v['us_per_call']:.1f}", f"{v['us_per_step']:.1f}"]
                    for k, v in sql["statements"].items()
                    if v["us_per_step"] >= 0.05
                ],
            )
        )
    parts.append(
        _table(
            "\nPieces timed alone (no profiler)",
            ["piece", "us"],
            [[k, f"{v:,.2f}"] for k, v in report["component_costs_us"].items()],
        )
    )
    return "\n".join(parts)


async def short_run(workdir: Path, steps: int, repeats: int) -> dict[str, Any] | None:
    """The same comparison at ``QUICK_STEPS`` steps: LangGraph's per-step cost grows with the history."""
    try:
        lg = run_langgraph_sync(workdir, QUICK_STEPS)
    except ImportError:
        return None
    rows = []
    cases: list[tuple[Durability, str, float | None]] = [
        ("normal", "list", TARGET_NORMAL_RATIO),
        ("full", "list", TARGET_FULL_RATIO),
        ("normal", "fn", None),
        ("full", "fn", None),
    ]
    for durability, script, target in cases:
        rs = [
            await run_repertory(workdir, QUICK_STEPS, durability, HEADLINE_IDEMPOTENT, script) for _ in range(repeats)
        ]
        rate = (QUICK_STEPS + 1) / statistics.median(r.seconds for r in rs)
        rows.append(
            {
                "label": f"{durability}, default @tool, {SCRIPT_LABELS[script]}",
                "durability": durability,
                "script": script,
                "steps_per_s": rate,
                "ratio": rate / lg.steps_per_s,
                "target": target,
                "meets": None if target is None else rate / lg.steps_per_s >= target,
            }
        )
    return {"steps": QUICK_STEPS, "langgraph": asdict(lg), "rows": rows}


async def run(
    steps: int,
    quick: bool,
    repeats: int,
    langgraph_async: bool,
    peers: bool = True,
    smoke: bool = False,
    run_lengths: Sequence[int] = (),
) -> dict[str, Any]:
    """Every measurement, in one temporary folder on the same disk as the system's temp dir.

    ``peers=False`` leaves LangGraph out (the suite's ``--skip-peers``); a LangGraph that is not
    installed is left out too, and the report says why. ``smoke`` only changes the mode recorded.
    """
    machine = machine_info()
    durabilities: tuple[Durability, ...] = ("normal", "full")
    configs = [(d, i, s) for d in durabilities for i in (False, True) for s in SCRIPTS]
    runs: dict[tuple[Durability, bool, str], list[RepertoryRun]] = {c: [] for c in configs}
    lg_runs: list[LangGraphRun] = []
    profiles: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="repertory-steps-") as tmp:
        workdir = Path(tmp)
        commits = {"default": await count_commits(workdir, False), "idempotent": await count_commits(workdir, True)}
        await run_repertory(workdir, min(steps, 50), "normal", False, "list")  # warm imports and caches
        # Configurations alternate round by round, so a noisy neighbour hits all of them alike.
        for rnd in range(repeats):
            for durability, idempotent, script in configs:
                r = await run_repertory(
                    workdir,
                    steps,
                    durability,
                    idempotent,
                    script,
                    measure_disk=rnd == 0,
                )
                runs[(durability, idempotent, script)].append(r)
                print(
                    f"  repertory {durability:6} {'idempotent' if idempotent else 'default':10} {script:10} "
                    f"{r.steps_per_s:8,.0f} steps/s",
                    file=sys.stderr,
                )
        peer_skipped: str | None = None if peers else "not run (--skip-peers)"
        if peers:
            try:
                lg_runs.append(run_langgraph_sync(workdir, steps))
                print(f"  LangGraph SqliteSaver {lg_runs[-1].steps_per_s:,.1f} steps/s", file=sys.stderr)
                if langgraph_async:
                    lg_runs.append(await run_langgraph_async(workdir, steps))
                    print(f"  LangGraph AsyncSqliteSaver {lg_runs[-1].steps_per_s:,.1f} steps/s", file=sys.stderr)
            except ImportError as exc:
                peer_skipped = f"not installed ({exc}); install the 'bench' extra"
                print(f"  LangGraph {peer_skipped}", file=sys.stderr)
        with_peers = peers and peer_skipped is None
        short = await short_run(workdir, steps, repeats) if with_peers and not quick and steps > QUICK_STEPS else None
        summary: list[dict[str, Any]] = []
        for (durability, idempotent, script), rs in runs.items():
            secs = statistics.median(r.seconds for r in rs)
            summary.append(
                {
                    "durability": durability,
                    "idempotent": idempotent,
                    "script": script,
                    "runs": len(rs),
                    "seconds_median": secs,
                    "steps_per_s": (steps + 1) / secs,
                    "us_per_step": secs * 1e6 / (steps + 1),
                    "steps_per_s_all": [r.steps_per_s for r in rs],
                    "disk": rs[0].disk,
                }
            )
        for script in (HEADLINE_SCRIPT, "fn"):
            wall: float = next(
                s["us_per_step"]
                for s in summary
                if (s["durability"], s["idempotent"], s["script"]) == ("normal", HEADLINE_IDEMPOTENT, script)
            )
            prof = cProfile.Profile()
            await run_repertory(workdir, steps, "normal", HEADLINE_IDEMPOTENT, script, profile=prof)
            profiles.append(
                {
                    "label": f"durability normal, default @tool, {SCRIPT_LABELS[script]}",
                    "script": script,
                    "report": profile_report(prof, steps, wall),
                }
            )
        sql = [await sql_breakdown(workdir, steps, d) for d in durabilities]
        costs = await component_costs(steps)
        headline_runs = runs[("normal", HEADLINE_IDEMPOTENT, HEADLINE_SCRIPT)]
        known = {steps: {"repertory": headline_runs[0].disk["bytes_on_disk"]}}
        if lg_runs:
            known[steps]["langgraph"] = lg_runs[0].disk["bytes_on_disk"]
        by_length = await bytes_by_run_length(workdir, run_lengths, with_peers, known)
    machine["load_average_after"] = list(os.getloadavg())
    after = machine_info()
    machine["git_commit_after"] = after.get("git_commit")
    machine["repertory_tree_dirty_after"] = after.get("repertory_tree_dirty")

    def pick(durability: str, idempotent: bool, script: str) -> dict[str, Any]:
        return next(
            s for s in summary if (s["durability"], s["idempotent"], s["script"]) == (durability, idempotent, script)
        )

    ratios: dict[str, Any] = {}
    disk_rows: list[dict[str, Any]] = []
    headline = pick("normal", HEADLINE_IDEMPOTENT, HEADLINE_SCRIPT)
    hd = headline["disk"]
    disk_rows.append(
        {
            "who": f"repertory (normal, default @tool, {SCRIPT_LABELS[HEADLINE_SCRIPT]})",
            "bytes_on_disk": hd["bytes_on_disk"],
            "payload_bytes": hd["message_json_bytes"] + hd["run_state_json_bytes"],
            "wal_bytes_before_checkpoint": hd["wal_bytes_before_checkpoint"],
            "detail": hd,
        }
    )
    for g in lg_runs:
        disk_rows.append(
            {
                "who": f"LangGraph {g.saver}",
                "bytes_on_disk": g.disk["bytes_on_disk"],
                "payload_bytes": g.checkpoint_blob_bytes + g.write_blob_bytes,
                "wal_bytes_before_checkpoint": g.disk["wal_bytes_before_checkpoint"],
                "detail": g.disk,
            }
        )
    disk: dict[str, Any] = {"rows": disk_rows, "target_max_ratio": TARGET_DISK_RATIO, "ratio": None, "meets": None}
    if lg_runs:
        ref = lg_runs[0]
        rows = []
        for dur, idempotent, script, target in [
            ("normal", False, "list", TARGET_NORMAL_RATIO),
            ("full", False, "list", TARGET_FULL_RATIO),
            ("normal", True, "list", None),
            ("full", True, "list", None),
            ("normal", False, "fn", None),
            ("full", False, "fn", None),
            ("normal", True, "fn", None),
            ("full", True, "fn", None),
        ]:
            s = pick(dur, idempotent, script)
            ratio = s["steps_per_s"] / ref.steps_per_s
            rows.append(
                {
                    "label": f"{dur}, {'idempotent' if idempotent else 'default @tool'}, {SCRIPT_LABELS[script]}",
                    "dur": dur,
                    "idempotent": idempotent,
                    "script": script,
                    "steps_per_s": s["steps_per_s"],
                    "ratio": ratio,
                    "target": target,
                    "meets": None if target is None else ratio >= target,
                }
            )
        ratios = {
            "langgraph_reference": f"{ref.saver} + {ref.invoke}",
            "langgraph_steps_per_s": ref.steps_per_s,
            "rows": rows,
        }
        if len(lg_runs) > 1:
            ratios["against_async_saver"] = {r["label"]: r["steps_per_s"] / lg_runs[1].steps_per_s for r in rows}
        disk["ratio"] = hd["bytes_on_disk"] / ref.disk["bytes_on_disk"]
        disk["meets"] = disk["ratio"] <= TARGET_DISK_RATIO
    pair = ModelMessage(
        role="assistant",
        origin=Origin(kind="model"),
        parts=[ToolCallPart(tool_call_id="call_" + "A" * 26, tool_name=TOOL_NAME, args={"i": 1})],
    ).model_dump_json()
    tool_json = ModelMessage(
        role="tool",
        origin=Origin(kind="tool"),
        parts=[ToolResultPart(tool_call_id="call_" + "A" * 26, tool_name=TOOL_NAME, result=result_text(1))],
    ).model_dump_json()
    return {
        "benchmark": "steps",
        "mode": "smoke" if smoke else "quick" if quick else "full",
        "peers": {"langgraph": peer_skipped or "measured"},
        "bytes_by_run_length": by_length,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine,
        "workdir": tempfile.gettempdir(),
        "steps": steps,
        "model_requests_per_run": steps + 1,
        "repeats": repeats,
        "tool_result_chars": RESULT_CHARS,
        "message_pair_json_bytes": len(pair) + len(tool_json),
        "durability": {
            "repertory": {
                "normal": "WAL + synchronous=NORMAL (default; survives a process crash)",
                "full": "WAL + synchronous=FULL (survives power loss)",
            },
            "langgraph": "durability='async' (default, not passed): a super-step's checkpoint is written in the "
            "background while the next super-step runs; SqliteSaver's connection is WAL with SQLite's "
            "default synchronous (see runs[].sqlite_synchronous)",
            "profiles": "normal",
        },
        "targets": {
            "normal_ratio": TARGET_NORMAL_RATIO,
            "full_ratio": TARGET_FULL_RATIO,
            "disk_ratio_max": TARGET_DISK_RATIO,
        },
        "repertory": {
            "commits": commits,
            "summary": summary,
            "runs": {
                f"{d}/{'idempotent' if i else 'default'}/{s}": [asdict(r) for r in rs] for (d, i, s), rs in runs.items()
            },
        },
        "langgraph": {
            "runs": [asdict(g) for g in lg_runs],
            "graph": "StateGraph(MessagesState): model node (plain function emitting the scripted "
            "AIMessage tool call) -> tools_condition -> prebuilt ToolNode -> model node",
            "recursion_limit": 2 * steps + 10,
        },
        "ratios": ratios,
        "short_run": short,
        "disk": disk,
        "profiles": profiles,
        "sql_statements": [x for x in sql if x is not None],
        "component_costs_us": costs,
    }


RUN_LENGTHS = (10, 30, 100, 300)
SMOKE = {"steps": 20, "run_lengths": (5, 10)}


def run_suite(quick: bool, out_dir: Path = RESULTS.parent, peers: bool = True) -> dict[str, Any]:
    """The suite's entry (``python -m benchmarks``): measure, print, write ``out_dir/steps.json``.

    ``quick`` is the suite's smoke size (20 steps, one round, no AsyncSqliteSaver run).
    """
    if quick:
        report = asyncio.run(run(SMOKE["steps"], True, 1, False, peers, True, SMOKE["run_lengths"]))
    else:
        report = asyncio.run(run(DEFAULT_STEPS, False, 3, True, peers, run_lengths=RUN_LENGTHS))
    print(render(report))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "steps.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def main(argv: Sequence[str] | None = None) -> None:
    """Parse arguments, measure, print the table and write the JSON report."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.steps", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_STEPS} steps, one round (a smoke run)")
    parser.add_argument("--steps", type=int, default=None, help=f"tool steps per run (default {DEFAULT_STEPS:,})")
    parser.add_argument("--repeats", type=int, default=None, help="rounds of repertory runs (default 3, quick 1)")
    parser.add_argument("--no-langgraph-async", action="store_true", help="skip the AsyncSqliteSaver run")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"JSON report path (default: {RESULTS})")
    args = parser.parse_args(argv)
    steps = args.steps if args.steps is not None else (QUICK_STEPS if args.quick else DEFAULT_STEPS)
    if steps < 1:
        parser.error("--steps must be >= 1")
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 3)
    lengths = tuple(n for n in RUN_LENGTHS if n < steps)
    report = asyncio.run(run(steps, args.quick, repeats, not args.no_langgraph_async, run_lengths=lengths))
    print(render(report))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
