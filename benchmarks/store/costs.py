"""Where a commit's time goes: the Python pieces timed alone, and cProfile over engine-style commits."""

from __future__ import annotations

import cProfile
import gc
from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness.commits import EngineSession
from benchmarks.harness.profiling import cumulative, label, matches, stats_of, top_by_tottime, total_tottime
from benchmarks.harness.timing import per_call_us
from benchmarks.store.report import CommitProfile, GroupTime, PrivateReads, TopFunction
from repertory.core.history import MessageHistory
from repertory.core.ids import new_id
from repertory.core.messages import ModelMessage
from repertory.storage.commit_plan import plan_commit
from repertory.storage.sqlite.store import SqliteSessionStore

__all__ = ["component_costs", "profile_commits"]


def component_costs(calls: int, message: ModelMessage) -> dict[str, float]:
    """Microseconds per call of the Python pieces of one commit, timed alone (no profiler overhead)."""
    session = EngineSession.new()
    session.history.extend([message, message])
    base = session.history.revisions[0].id
    session.point_at(session.history.revision_id)
    run, thread, history = session.run, session.thread, session.history
    scratch = MessageHistory()

    def set_pointers() -> None:
        session.point_at(history.revision_id)

    def serialise_rows() -> None:
        # What commit_session builds before BEGIN: the run row's JSON and each new entry's JSON.
        run.model_dump_json()
        message.model_dump_json()

    return {
        "new_id": per_call_us(new_id, calls),
        "history_append": per_call_us(lambda: scratch.append(message), calls),
        "set_pointers_and_timestamps": per_call_us(set_pointers, calls),
        "plan_commit_one_revision": per_call_us(
            lambda: plan_commit(run, thread, history, base, lambda _: False), calls
        ),
        "run_model_dump_json": per_call_us(run.model_dump_json, calls),
        "message_model_dump_json": per_call_us(message.model_dump_json, calls),
        "serialise_rows_total": per_call_us(serialise_rows, calls),
    }


# label -> (file suffix, or "~" for built-ins; function) whose *cumulative* time is the group. These
# never call one another on the commit path, so the groups add up; what is left over is asyncio,
# context managers and glue.
PROFILE_GROUPS: dict[str, tuple[tuple[str, str], ...]] = {
    "sqlite statements (execute/executemany/fetchone)": (
        ("~", "<method 'execute' of 'sqlite3.Connection' objects>"),
        ("~", "<method 'executemany' of 'sqlite3.Connection' objects>"),
        ("~", "<method 'fetchone' of 'sqlite3.Cursor' objects>"),
    ),
    "MessageHistory.append (ids, records)": (("repertory/core/history.py", "append"),),
    "plan_commit (pointer checks, walk back)": (("repertory/storage/commit_plan.py", "plan_commit"),),
    "model_dump_json (run row + entry JSON)": (("pydantic/main.py", "model_dump_json"),),
    "engine pointer updates (benchmark's point_at)": (("benchmarks/harness/commits.py", "point_at"),),
}
# Cuts across the groups above: pydantic private attributes (MessageHistory's indexes) are read
# through BaseModel.__getattr__, a slow path, on every lookup.
PRIVATE_ATTR_READS = ("pydantic/main.py", "__getattr__")


async def profile_commits(workdir: Path, commits: int, pool: Sequence[ModelMessage]) -> CommitProfile:
    """cProfile over engine-style commits: top functions by own time, and time by group.

    cProfile taxes every Python call, so Python-heavy parts look bigger than they are; the groups are
    read as shares of the profiled loop, and the unprofiled component costs give the true sizes.
    """
    store = await SqliteSessionStore.open(workdir / "profile.db")
    session = EngineSession.new()
    batch = [pool[i % len(pool)] for i in range(commits)]
    try:
        for message in batch[:200]:
            await session.step(store, message)
        profiler = cProfile.Profile()
        gc.collect()
        profiler.enable()
        for message in batch:
            await session.step(store, message)
        profiler.disable()
    finally:
        await store.close()
    stats = stats_of(profiler)
    total = total_tottime(stats)
    groups = {name: cumulative(stats, wheres) for name, wheres in PROFILE_GROUPS.items()}
    groups["everything else (asyncio, context managers, glue)"] = max(total - sum(groups.values()), 0.0)
    private_reads = cumulative(stats, [PRIVATE_ATTR_READS])
    private_calls = sum(s[1] for key, s in stats.items() if matches(key, *PRIVATE_ATTR_READS))
    ranked = sorted(groups.items(), key=lambda kv: kv[1], reverse=True)
    summary = (
        "; ".join(f"{name.split(' (')[0]} {s / total:.0%}" for name, s in ranked)
        + f"; across them, pydantic private-attribute reads {private_reads / total:.0%}"
        f" ({private_calls / commits:.0f} per commit)"
    )
    return CommitProfile(
        commits=commits,
        durability="normal",
        profiled_total_s=total,
        profiled_us_per_commit=total / commits * 1e6,
        summary=summary,
        top_by_tottime=[
            TopFunction(
                function=label(key, basename=True),
                ncalls=s[1],
                tottime_s=s[2],
                cumtime_s=s[3],
                tottime_us_per_commit=s[2] / commits * 1e6,
            )
            for key, s in top_by_tottime(stats, 15)
        ],
        groups={
            name: GroupTime(seconds=s, share=s / total, us_per_commit=s / commits * 1e6) for name, s in groups.items()
        },
        pydantic_private_attr_reads=PrivateReads(
            calls_per_commit=private_calls / commits,
            us_per_commit=private_reads / commits * 1e6,
            share=private_reads / total,
        ),
    )
