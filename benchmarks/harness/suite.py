"""The benchmarks ``python -m benchmarks`` runs, in order, how each is found, and how one run goes.

A benchmark is a package ``benchmarks.<name>`` whose ``__init__`` exposes (and imports nothing heavy,
so the renderer can load it without Ray or a database driver)::

    REPORT: type[Report]                 # its typed report
    PLOTS: Sequence[Plot[...]]           # the PNGs drawn from it (maybe none)
    def run_suite(quick: bool, out_dir: Path, peers: bool = True) -> Report

``run_suite`` measures (``quick``: the smallest sizes that still exercise every code path, seconds
not minutes), prints its tables, writes ``out_dir/<name>.json`` and returns the report. Cheap
benchmarks come first, so a quick look at a full run has figures early; Ray comes last because it
starts (and stops) a Ray instance of its own.

A benchmark whose package lives elsewhere is named in ``HOMES``: the chaos soak is a test
(``tests/soak/``, its invariants asserted by its checker), and the suite still runs it and
renders its figures through the same three names.
"""

from __future__ import annotations

import importlib
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, cast

from benchmarks.harness.model import BenchModel
from benchmarks.harness.report import Report

__all__ = [
    "BENCHMARKS",
    "HOMES",
    "SUITE_STATUS",
    "Benchmark",
    "Entry",
    "Loaded",
    "Status",
    "SuiteRun",
    "load",
    "run_one",
    "select",
]

SUITE_STATUS = "suite.json"
HOMES: dict[str, str] = {"chaos": "tests.soak"}
"""The package of a benchmark that is not ``benchmarks.<name>``."""


@dataclass(frozen=True)
class Benchmark:
    """One registered benchmark; ``quick_skip`` says why ``--quick`` leaves it out (None: it runs)."""

    name: str
    about: str
    quick_skip: str | None = None


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
    Benchmark("compaction", "turn latency and bytes per turn to 100,000 turns, with and without compaction",
              quick_skip="its quick mode drives turns for two minutes; `python -m benchmarks.compaction --quick`"),
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

Entry = Callable[[bool, Path, bool], Report]
"""``run_suite(quick, out_dir, peers)``."""


@dataclass(frozen=True)
class Loaded:
    """What a benchmark package exposes (see the module docstring)."""

    name: str
    report: type[Report]
    plots: Sequence[Any]
    run_suite: Entry


def load(name: str) -> Loaded | None:
    """The package ``benchmarks.<name>`` (or its ``HOMES`` entry), or ``None`` when it does not exist (yet).

    Only the package's own absence counts as "not present": an import error inside it is a failure
    the caller must see, as is a package without the three names.
    """
    package = HOMES.get(name, f"benchmarks.{name}")
    try:
        module: ModuleType = importlib.import_module(package)
    except ModuleNotFoundError as exc:
        if exc.name == package:
            return None
        raise
    report, plots, entry = (getattr(module, attr, None) for attr in ("REPORT", "PLOTS", "run_suite"))
    if not (isinstance(report, type) and issubclass(report, Report)) or plots is None or not callable(entry):
        raise TypeError(f"{package} must expose REPORT (a Report subclass), PLOTS and run_suite")
    return Loaded(name, report, list(plots), cast(Entry, entry))


StatusName = Literal["ran", "skipped", "not present", "FAILED"]


class Status(BenchModel):
    """What happened to one benchmark in a suite run."""

    name: str
    status: StatusName
    seconds: float | None = None
    detail: str = ""


class SuiteRun(BenchModel):
    """``suite.json``: the mode and times of the last suite run, and each benchmark's status."""

    mode: Literal["full", "quick"]
    started_at: str
    finished_at: str
    benchmarks: list[Status]


def run_one(bench: Benchmark, quick: bool, out: Path, peers: bool) -> Status:
    """Run one benchmark through its entry; what happened, for the suite's status.

    A benchmark that raises is reported ``FAILED`` with its traceback printed, and the suite goes
    on; one that measured some parts and lists others in ``failed`` is ``FAILED`` too.
    """
    if quick and bench.quick_skip:
        return Status(name=bench.name, status="skipped", detail=f"quick mode: {bench.quick_skip}")
    started = time.perf_counter()
    try:
        loaded = load(bench.name)
        if loaded is None:
            return Status(name=bench.name, status="not present", detail=f"no benchmarks/{bench.name}/ yet")
        report = loaded.run_suite(quick, out, peers)
    except Exception:  # one benchmark failing must not stop the others
        traceback.print_exc()
        return Status(name=bench.name, status="FAILED", seconds=round(time.perf_counter() - started, 1),
                      detail=traceback.format_exc(limit=1).strip().splitlines()[-1])  # fmt: skip
    seconds = round(time.perf_counter() - started, 1)
    if report.failed:  # a part failed, the rest was measured and written
        failed = "; ".join(f"{k}: {v}" for k, v in report.failed.items())
        return Status(name=bench.name, status="FAILED", seconds=seconds, detail=f"in part: {failed}")
    missing = {k: v for k, v in report.peers.items() if v != "measured"}
    detail = "; ".join(f"peer {k} skipped: {v}" for k, v in missing.items())
    return Status(name=bench.name, status="ran", seconds=seconds, detail=detail)


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
