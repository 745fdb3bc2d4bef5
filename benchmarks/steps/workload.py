"""The step workload: one session, N tool steps of ~1 KB results, then a final reply (see ``benchmarks.steps``)."""

from __future__ import annotations

import cProfile
import gc
import random
import sqlite3
import string
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.harness.sqlite_files import disk_usage, remove_database, scalar
from benchmarks.steps.report import CommitCounts, RepertoryRun
from repertory import Agent, ModelMessage, Session, Tool, tool
from repertory.core.store import SessionStore
from repertory.storage.sqlite.store import Durability, SqliteSessionStore
from repertory.testing import ScriptedModel

__all__ = [
    "FINAL_TEXT",
    "RESULT_CHARS",
    "TOOL_NAME",
    "USER_TEXT",
    "call_id",
    "count_commits",
    "repertory_model",
    "repertory_tool",
    "result_text",
    "run_repertory",
    "run_session",
]

RESULT_CHARS = 1_000
FINAL_TEXT = "All records fetched."
USER_TEXT = "Fetch every record, one tool call at a time."
TOOL_NAME = "fetch"
FILLER = "".join(random.Random(1).choices(string.ascii_letters + " ", k=RESULT_CHARS))


def result_text(i: int) -> str:
    """The tool's reply for record ``i``: exactly ``RESULT_CHARS`` characters, different every step."""
    prefix = f"record {i:06d}: "
    return prefix + FILLER[len(prefix) :]


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


async def run_session(store: SessionStore, steps: int, idempotent: bool, script: str, name: str = "bench") -> None:
    """One untimed run of the workload on ``store`` (diagnostic runs: counting, wrapped connections)."""
    agent = Agent(
        name=name, model=repertory_model(script, steps), tools=[repertory_tool(idempotent)], max_steps=steps + 1
    )
    await Session(store=store, agent=agent).start(USER_TEXT)


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
        disk = None
        if measure_disk:
            disk = disk_usage(db)
            count, payload = scalar(db, "SELECT count(*), sum(length(message)) FROM history_entries")
            (state_bytes,) = scalar(db, "SELECT sum(length(state)) FROM runs")
            disk.messages, disk.message_json_bytes, disk.run_state_json_bytes = count, payload, state_bytes
            if count != 2 * steps + 2:
                raise RuntimeError(f"repertory stored {count} messages, expected {2 * steps + 2}")
    finally:
        await store.close()
        remove_database(db)
    return RepertoryRun(
        durability=durability,
        idempotent=idempotent,
        script=script,
        steps=steps,
        seconds=seconds,
        steps_per_s=(steps + 1) / seconds,
        us_per_step=seconds * 1e6 / (steps + 1),
        disk=disk,
    )


async def count_commits(workdir: Path, idempotent: bool) -> CommitCounts:
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
            await run_session(store, steps, idempotent, "fn", name="count")
            _, frames, _ = probe.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        finally:
            probe.close()
            await store.close()
        counts[steps] = (calls, int(frames))
    per_step = (counts[30][0] - counts[10][0]) / 20
    pages = (counts[30][1] - counts[10][1]) / (counts[30][0] - counts[10][0])
    return CommitCounts(
        commits_per_tool_step=per_step,
        fixed_commits_per_run=counts[10][0] - per_step * 10,
        wal_pages_per_commit=pages,
        wal_pages_per_tool_step=pages * per_step,
    )
