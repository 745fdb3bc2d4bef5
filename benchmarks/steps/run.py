"""The step benchmark's run: every configuration round by round, LangGraph, the ratios, the diagnostics."""

from __future__ import annotations

import asyncio
import cProfile
import os
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness.machine import git_state
from benchmarks.harness.report import Clock, finish, mode_of
from benchmarks.steps.diagnostics import bytes_by_run_length, component_costs, sql_breakdown
from benchmarks.steps.langgraph import GRAPH, run_langgraph_async, run_langgraph_sync
from benchmarks.steps.profile import profile_report
from benchmarks.steps.report import (
    HEADLINE_IDEMPOTENT,
    HEADLINE_SCRIPT,
    SCRIPT_LABELS,
    SCRIPTS,
    TARGET_DISK_RATIO,
    TARGET_FULL_RATIO,
    TARGET_NORMAL_RATIO,
    ConfigSummary,
    DiskComparison,
    DiskRow,
    Durabilities,
    LangGraphPart,
    LangGraphRun,
    RatioRow,
    Ratios,
    RepertoryPart,
    RepertoryRun,
    ShortRow,
    ShortRun,
    StepProfile,
    StepsReport,
)
from benchmarks.steps.workload import RESULT_CHARS, TOOL_NAME, count_commits, result_text, run_repertory
from repertory import ModelMessage, Origin
from repertory.core.messages import ToolCallPart, ToolResultPart
from repertory.storage.sqlite.store import Durability

__all__ = ["DEFAULT_STEPS", "QUICK_STEPS", "RUN_LENGTHS", "measure"]

DEFAULT_STEPS = 1_000
QUICK_STEPS = 100
RUN_LENGTHS = (10, 30, 100, 300)
Config = tuple[Durability, bool, str]


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def short_run(workdir: Path, repeats: int) -> ShortRun | None:
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
            ShortRow(
                label=f"{durability}, default @tool, {SCRIPT_LABELS[script]}",
                durability=durability,
                script=script,
                steps_per_s=rate,
                ratio=rate / lg.steps_per_s,
                target=target,
                meets=None if target is None else rate / lg.steps_per_s >= target,
            )
        )
    return ShortRun(steps=QUICK_STEPS, langgraph=lg, rows=rows)


def _summary(runs: dict[Config, list[RepertoryRun]], steps: int) -> list[ConfigSummary]:
    out = []
    for (durability, idempotent, script), rs in runs.items():
        secs = statistics.median(r.seconds for r in rs)
        out.append(
            ConfigSummary(
                durability=durability,
                idempotent=idempotent,
                script=script,
                runs=len(rs),
                seconds_median=secs,
                steps_per_s=(steps + 1) / secs,
                us_per_step=secs * 1e6 / (steps + 1),
                steps_per_s_all=[r.steps_per_s for r in rs],
                disk=rs[0].disk,
            )
        )
    return out


def _ratios(part: RepertoryPart, lg_runs: list[LangGraphRun]) -> Ratios | None:
    if not lg_runs:
        return None
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
        s = part.pick(dur, idempotent, script)
        ratio = s.steps_per_s / ref.steps_per_s
        rows.append(
            RatioRow(
                label=f"{dur}, {'idempotent' if idempotent else 'default @tool'}, {SCRIPT_LABELS[script]}",
                dur=dur,
                idempotent=idempotent,
                script=script,
                steps_per_s=s.steps_per_s,
                ratio=ratio,
                target=target,
                meets=None if target is None else ratio >= target,
            )
        )
    against = {r.label: r.steps_per_s / lg_runs[1].steps_per_s for r in rows} if len(lg_runs) > 1 else None
    return Ratios(
        langgraph_reference=f"{ref.saver} + {ref.invoke}",
        langgraph_steps_per_s=ref.steps_per_s,
        rows=rows,
        against_async_saver=against,
    )


def _disk(part: RepertoryPart, lg_runs: list[LangGraphRun]) -> DiskComparison:
    hd = part.pick("normal", HEADLINE_IDEMPOTENT, HEADLINE_SCRIPT).disk
    assert hd is not None and hd.message_json_bytes is not None and hd.run_state_json_bytes is not None
    rows = [
        DiskRow(
            who=f"repertory (normal, default @tool, {SCRIPT_LABELS[HEADLINE_SCRIPT]})",
            bytes_on_disk=hd.bytes_on_disk,
            payload_bytes=hd.message_json_bytes + hd.run_state_json_bytes,
            wal_bytes_before_checkpoint=hd.wal_bytes_before_checkpoint,
            detail=hd,
        )
    ]
    for g in lg_runs:
        assert g.disk is not None
        rows.append(
            DiskRow(
                who=f"LangGraph {g.saver}",
                bytes_on_disk=g.disk.bytes_on_disk,
                payload_bytes=g.checkpoint_blob_bytes + g.write_blob_bytes,
                wal_bytes_before_checkpoint=g.disk.wal_bytes_before_checkpoint,
                detail=g.disk,
            )
        )
    disk = DiskComparison(rows=rows)
    if lg_runs and lg_runs[0].disk is not None:
        disk.ratio = hd.bytes_on_disk / lg_runs[0].disk.bytes_on_disk
        disk.meets = disk.ratio <= TARGET_DISK_RATIO
    return disk


def _pair_bytes() -> int:
    """JSON bytes of one step's assistant/tool message pair."""
    call = ToolCallPart(tool_call_id="call_" + "A" * 26, tool_name=TOOL_NAME, args={"i": 1})
    assistant = ModelMessage(role="assistant", origin=Origin(kind="model"), parts=[call])
    answer = ToolResultPart(tool_call_id="call_" + "A" * 26, tool_name=TOOL_NAME, result=result_text(1))
    tool_message = ModelMessage(role="tool", origin=Origin(kind="tool"), parts=[answer])
    return len(assistant.model_dump_json()) + len(tool_message.model_dump_json())


async def _measure(
    clock: Clock,
    steps: int,
    repeats: int,
    langgraph_async: bool,
    peers: bool,
    quick: bool,
    run_lengths: Sequence[int],
) -> StepsReport:
    durabilities: tuple[Durability, ...] = ("normal", "full")
    configs: list[Config] = [(d, i, s) for d in durabilities for i in (False, True) for s in SCRIPTS]
    runs: dict[Config, list[RepertoryRun]] = {c: [] for c in configs}
    lg_runs: list[LangGraphRun] = []
    profiles: list[StepProfile] = []
    with tempfile.TemporaryDirectory(prefix="repertory-steps-") as tmp:
        workdir = Path(tmp)
        commits = {"default": await count_commits(workdir, False), "idempotent": await count_commits(workdir, True)}
        await run_repertory(workdir, min(steps, 50), "normal", False, "list")  # warm imports and caches
        # Configurations alternate round by round, so a noisy neighbour hits all of them alike.
        for rnd in range(repeats):
            for durability, idempotent, script in configs:
                r = await run_repertory(workdir, steps, durability, idempotent, script, measure_disk=rnd == 0)
                runs[(durability, idempotent, script)].append(r)
                _say(f"  repertory {durability:6} {'idempotent' if idempotent else 'default':10} {script:10} "
                     f"{r.steps_per_s:8,.0f} steps/s")  # fmt: skip
        peer_skipped: str | None = None if peers else "not run (--skip-peers)"
        if peers:
            try:
                lg_runs.append(run_langgraph_sync(workdir, steps))
                _say(f"  LangGraph SqliteSaver {lg_runs[-1].steps_per_s:,.1f} steps/s")
                if langgraph_async:
                    lg_runs.append(await run_langgraph_async(workdir, steps))
                    _say(f"  LangGraph AsyncSqliteSaver {lg_runs[-1].steps_per_s:,.1f} steps/s")
            except ImportError as exc:
                peer_skipped = f"not installed ({exc}); install the 'bench' extra"
                _say(f"  LangGraph {peer_skipped}")
        with_peers = peers and peer_skipped is None
        short = await short_run(workdir, repeats) if with_peers and not quick and steps > QUICK_STEPS else None
        part = RepertoryPart(
            commits=commits,
            summary=_summary(runs, steps),
            runs={f"{d}/{'idempotent' if i else 'default'}/{s}": rs for (d, i, s), rs in runs.items()},
        )
        for script in (HEADLINE_SCRIPT, "fn"):
            wall = part.pick("normal", HEADLINE_IDEMPOTENT, script).us_per_step
            prof = cProfile.Profile()
            await run_repertory(workdir, steps, "normal", HEADLINE_IDEMPOTENT, script, profile=prof)
            profiles.append(
                StepProfile(
                    label=f"durability normal, default @tool, {SCRIPT_LABELS[script]}",
                    script=script,
                    report=profile_report(prof, steps, wall),
                )
            )
        sql = [await sql_breakdown(workdir, steps, d) for d in durabilities]
        costs = await component_costs(steps)
        headline_disk = runs[("normal", HEADLINE_IDEMPOTENT, HEADLINE_SCRIPT)][0].disk
        assert headline_disk is not None
        known = {steps: {"repertory": headline_disk.bytes_on_disk}}
        if lg_runs and lg_runs[0].disk is not None:
            known[steps]["langgraph"] = lg_runs[0].disk.bytes_on_disk
        by_length = await bytes_by_run_length(workdir, run_lengths, with_peers, known)
    after = git_state()
    clock.machine.git_commit_after = after.get("git_commit")
    clock.machine.repertory_tree_dirty_after = after.get("repertory_tree_dirty")
    return StepsReport(
        **clock.frame(),
        peers={"langgraph": peer_skipped or "measured"},
        bytes_by_run_length=by_length,
        workdir=tempfile.gettempdir(),
        steps=steps,
        model_requests_per_run=steps + 1,
        repeats=repeats,
        tool_result_chars=RESULT_CHARS,
        message_pair_json_bytes=_pair_bytes(),
        durability=Durabilities(
            repertory={
                "normal": "WAL + synchronous=NORMAL (default; survives a process crash)",
                "full": "WAL + synchronous=FULL (survives power loss)",
            },
            langgraph="durability='async' (default, not passed): a super-step's checkpoint is written in the "
            "background while the next super-step runs; SqliteSaver's connection is WAL with SQLite's "
            "default synchronous (see runs[].sqlite_synchronous)",
            profiles="normal",
        ),
        repertory=part,
        langgraph=LangGraphPart(runs=lg_runs, graph=GRAPH, recursion_limit=2 * steps + 10),
        ratios=_ratios(part, lg_runs),
        short_run=short,
        disk=_disk(part, lg_runs),
        profiles=profiles,
        sql_statements=sql,
        component_costs_us=costs,
    )


def measure(
    steps: int,
    quick: bool,
    repeats: int,
    langgraph_async: bool,
    peers: bool = True,
    smoke: bool = False,
    run_lengths: Sequence[int] = (),
) -> StepsReport:
    """Every measurement, in one temporary folder on the same disk as the system's temp dir.

    ``peers=False`` leaves LangGraph out (the suite's ``--skip-peers``); a LangGraph that is not
    installed is left out too, and the report says why. ``smoke`` only changes the mode recorded.
    """
    clock = Clock.start("steps", mode_of(quick, smoke))
    clock.machine.langsmith_tracing_env = {k: os.environ.get(k) for k in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2")}
    report = asyncio.run(_measure(clock, steps, repeats, langgraph_async, peers, quick, run_lengths))
    return finish(report, clock)
