"""The benchmarks ``python -m benchmarks`` runs, in order, and how one run goes.

Each benchmark is a module ``benchmarks.<name>`` run as ``python -m benchmarks.<name>`` in its own
process (``HOMES`` names one that lives elsewhere: the chaos soak is a test, in ``tests/soak``), so
one benchmark's memory, collector and event loop never reach the next. Cheap benchmarks come first,
so a quick look at a full run has figures early; Ray comes late because it starts a Ray of its own.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from benchmarks.harness.versions import ROOT

__all__ = ["BENCHMARKS", "HOMES", "Benchmark", "Status", "run_one", "select"]

HOMES: dict[str, str] = {"chaos": "tests.soak.suite"}
"""The module of a benchmark that is not ``benchmarks.<name>``."""


@dataclass(frozen=True)
class Benchmark:
    """One registered benchmark; ``quick_skip`` says why ``--quick`` leaves it out (None: it runs)."""

    name: str
    about: str
    quick_skip: str | None = None

    @property
    def module(self) -> str:
        """The module ``python -m`` runs."""
        return HOMES.get(self.name, f"benchmarks.{self.name}")


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("store", "commit_session throughput, load_history, bytes per message (SQLite, PostgreSQL)"),
    Benchmark("latency", "commit latency p50 / p99, one writer and many"),
    Benchmark("group_commit", "group commit: concurrent sessions' commits coalesced"),
    Benchmark("steps", "model steps/s of one session against LangGraph; bytes per step by run length"),
    Benchmark("deltas", "durable text deltas on vs off: steps/s, events and bytes per step, 50 deltas a step"),
    Benchmark("budgets", "the budget checks' share of a model step: none vs a run budget vs a tree budget"),
    Benchmark("gc_settings", "turns/s of many resident sessions: collector defaults, tune_gc, gc.freeze, uvloop"),
    Benchmark("fork", "fork cost vs history depth 10 to 100,000"),
    Benchmark("concurrency", "N concurrent sessions, log-normal model delay, local and Ray"),
    Benchmark("recovery", "10,000 suspended + 100 running sessions, SIGKILL, a fresh runtime"),
    Benchmark("sessions", "memory per session, creation rate, many sessions in one process"),
    Benchmark("memory", "long-term memory recall latency"),
    Benchmark("export", "Parquet export and DuckDB queries"),
    Benchmark("mcp_overhead", "an MCP tools/call through repertory against a direct SDK session (stdio, HTTP)"),
    Benchmark("mcp_server", "an agent's turn as an MCP tools/call to repertory vs handle.run() (stdio, HTTP)"),
    Benchmark("a2a_server", "an agent's turn as a blocking A2A SendMessage to repertory serve vs handle.run()"),
    Benchmark("compaction", "turn latency and bytes per turn to 100,000 turns, with and without compaction"),
    Benchmark("tracing", "what OpenTelemetry spans cost a step, off and on, against the build without tracing",
              quick_skip="exports the pre-tracing build (git archive) into child processes; "
                         "`python -m benchmarks.tracing --quick` runs it"),
    Benchmark("turns", "turn cost against the raw durable-write floor; issue 21's targets side by side"),
    Benchmark("limits", "where one process stops: a commit's cost per page, checkpoints, a step's parts, the GC"),
    Benchmark("ray", "the Ray backend: overhead, throughput, creation, memory, events, host crash",
              quick_skip="starting Ray takes ~10 s; `python -m benchmarks.ray --quick` runs it"),
    Benchmark("ray_failover", "a node of a three-node Ray cluster dies; its sessions are served elsewhere",
              quick_skip="starts a three-node Ray cluster; `python -m benchmarks.ray_failover --quick` runs it"),
    Benchmark("http", "repertory serve through langgraph-sdk: create + wait, stream, concurrent clients"),
    Benchmark("sse_readers", "1,000 SSE readers of one server following 100 streaming sessions: latency, CPU"),
    Benchmark("timers", "100,000 armed timers: memory per timer, the scheduler's queries, wake latency"),
    Benchmark("tenancy", "a key's page of sessions and its counts among 100,000, through the owner index",
              quick_skip="starts a PostgreSQL server; `python -m benchmarks.tenancy --quick` runs it"),
    Benchmark("million", "1,000,000 PostgreSQL sessions, 1% active: creation, cold activation, memory, sizes, WAL",
              quick_skip="a PostgreSQL server and two host processes take ~45 s even at 20,000 sessions; "
                         "`python -m benchmarks.million --quick` runs it"),
    Benchmark("chaos", "a mixed fleet under seeded faults for minutes, then an independent checker",
              quick_skip="three soaks with Ray and PostgreSQL; `python -m tests.soak --minutes 0.5` runs one"),
)  # fmt: skip


@dataclass(frozen=True)
class Status:
    """What happened to one benchmark in a suite run."""

    name: str
    status: Literal["ran", "skipped", "FAILED"]
    seconds: float | None = None
    detail: str = ""


def run_one(bench: Benchmark, quick: bool, out: Path, peers: bool) -> Status:
    """Run one benchmark in its own process, writing ``out/<name>.json``; what happened.

    A benchmark that fails prints its traceback and writes what it measured before the failure;
    the suite goes on to the next.
    """
    if quick and bench.quick_skip:
        return Status(bench.name, "skipped", detail=f"quick mode: {bench.quick_skip}")
    cmd = [sys.executable, "-m", bench.module, "--out", str(out / f"{bench.name}.json")]
    cmd += ["--quick"] if quick else []
    cmd += [] if peers else ["--skip-peers"]
    started = time.perf_counter()
    code = subprocess.run(cmd, cwd=ROOT, check=False).returncode
    seconds = round(time.perf_counter() - started, 1)
    if code != 0:
        return Status(bench.name, "FAILED", seconds, f"exit status {code}")
    return Status(bench.name, "ran", seconds, "" if peers else "peers skipped")


def select(only: str | None) -> list[Benchmark]:
    """The benchmarks named in ``only`` (comma-separated), in the order given; all when ``None``."""
    if not only:
        return list(BENCHMARKS)
    names = [n.strip() for n in only.split(",") if n.strip()]
    known = {b.name: b for b in BENCHMARKS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[n] for n in names]
