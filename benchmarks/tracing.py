"""Tracing benchmark: what OpenTelemetry spans cost a step, off (no provider) and on (SDK), against no tracing code.

Run ``python -m benchmarks.tracing [--quick] [--steps N] [--rounds R] [--runs K] [--baseline REF]``.
It prints a table and writes ``benchmarks/results/tracing.json``. Nothing here asserts a speed: a
figure over its target is a finding, not a failure.

The same steps run, side by side, under five configurations:

- ``baseline``: repertory as it was before ``repertory.tracing`` existed (``git archive`` of the
  parent of the commit that added ``repertory/tracing/__init__.py``, or ``--baseline REF``): the
  engine makes no tracing calls at all. This is "today" for the "off costs nothing" target.
- ``off``: this tree, no tracer provider set (``opentelemetry-api`` is installed, as it is wherever
  ``anthropic`` is): the engine's tracing calls run and find nothing to record.
- ``on``: this tree with an SDK ``TracerProvider`` and a ``SimpleSpanProcessor`` into an
  ``InMemorySpanExporter`` (the export is part of the cost).
- ``sdk-floor``: as ``on``, but the engine's ``chat`` and ``execute_tool`` spans are replaced by bare
  SDK spans (a name, no attributes, no context): what the SDK charges for two spans a step at all,
  so ``on - sdk-floor`` is what repertory's attributes and context handling add on top.
- ``on+content``: ``on`` with ``capture_content(True)``, which serialises every request's messages
  (the whole conversation, every step: informational, no target).

How, and why so: this machine is shared (a load of ~8 on 2 cores is usual), and two child
processes measuring the same code differ by 10-30%, far more than the 2% to be read. So both builds
run in one process and the configurations alternate run by run (rotating their order), and the
figures compare runs that saw the same machine. The baseline tree is unpacked as the package
``repertory_baseline`` (its ``import repertory...`` statements rewritten), so it and this tree are
separate packages side by side; the provider is switched between runs by resetting the API's
global (what OpenTelemetry's own test utilities do). Each of ``--rounds`` child processes warms
up, then times ``--runs`` passes over the configurations, in CPU time per model request
(``time.process_time``: every thread of the process, so SQLite's and the span processor's work
count; wall time is recorded too).

The workloads, both of ``Session.start()`` as in ``benchmarks/steps.py``:

- ``steps``: the step benchmark's headline: ``ScriptedModel(list)``, the default ``@tool`` (two
  commits a step), ``SqliteSessionStore`` with ``durability="normal"``.
- ``engine``: the cheapest step there is, where a fixed cost per step weighs most: a step-function
  ``ScriptedModel`` with usage given, ``@tool(idempotent=True)`` (one commit), ``InMemorySessionStore``.

Targets: ``off`` within 2% of ``baseline``; ``on`` at most 30 us a step more than ``off``. The
child also times the tracing calls of one step alone (``chat_span`` and ``tool_span`` with their
methods, inside a drive with tracing off) in nanoseconds: the direct cost the 2% is about.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from benchmarks.harness.cli import deliver
from benchmarks.harness.report import Report, Row, mode_of
from benchmarks.harness.report import row as summary_row

__all__ = ["PLOTS", "REPORT", "TracingReport", "main", "run", "run_suite", "typed"]

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "tracing.json"
DEFAULT_STEPS = 500
QUICK_STEPS = 50
DEFAULT_ROUNDS = 4
DEFAULT_RUNS = 5
TARGET_OFF_PCT = 2.0
TARGET_ON_US = 30.0
WORKLOADS = ("steps", "engine")
MODES = ("baseline", "off", "on", "sdk-floor", "on+content")
BASELINE_PACKAGE = "repertory_baseline"

# The child: every configuration of one workload, alternating, in one process; one JSON line out.
# It imports nothing from benchmarks/, only this tree's repertory and the baseline's copy.
CHILD = r'''
import asyncio, contextlib, gc, importlib, json, random, string, sys, tempfile, time, timeit
from pathlib import Path

workload, steps, runs, with_baseline = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

import repertory
import repertory.runtime._calls as calls_module
import repertory.runtime._loop as loop_module
from repertory.tracing import capture_content

builds = {"current": repertory}
if with_baseline:
    builds["baseline"] = importlib.import_module("repertory_baseline")
    assert not hasattr(builds["baseline"], "tracing") and "tracing" not in dir(builds["baseline"])
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
bare_tracer = provider.get_tracer("bench")
real_chat, real_tool = loop_module.chat_span, calls_module.tool_span


bare_time = [0.0, 0]  # CPU seconds of this thread inside start_span + end, spans


class Bare:
    def __init__(self, name):
        self.name = name
    def __enter__(self):
        start = time.thread_time()
        self.span = bare_tracer.start_span(self.name)
        bare_time[0] += time.thread_time() - start
        bare_time[1] += 1
        return self
    def __exit__(self, *exc):
        start = time.thread_time()
        self.span.end()
        bare_time[0] += time.thread_time() - start
    def response(self, response):
        pass
    def outcome(self, *args):
        pass


def configure(mode):
    """No provider, or the SDK one; bare spans for sdk-floor; content for on+content."""
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    if mode in ("on", "sdk-floor", "on+content"):
        trace.set_tracer_provider(provider)
    floor = mode == "sdk-floor"
    loop_module.chat_span = (lambda *args: Bare("chat")) if floor else real_chat
    calls_module.tool_span = (lambda *args: Bare("execute_tool")) if floor else real_tool
    capture_content(mode == "on+content")
    exporter.clear()


FILLER = "".join(random.Random(1).choices(string.ascii_letters + " ", k=1000))
USAGE = {"input_tokens": 100, "output_tokens": 20}


def make_agent(pkg, n):
    tool = pkg.tool
    @tool(name="fetch", idempotent=workload == "engine")
    async def fetch(i: int) -> str:
        """Fetch record i."""
        prefix = f"record {i:06d}: "
        return prefix + FILLER[len(prefix):]
    scripted = importlib.import_module(pkg.__name__ + ".testing").ScriptedModel
    if workload == "steps":
        model = scripted([{"tool": "fetch", "args": {"i": k}} for k in range(n)] + [{"text": "done"}])
    else:
        plan = [{"tool": "fetch", "args": {"i": k}, "usage": USAGE} for k in range(n)]
        plan.append({"text": "done", "usage": USAGE})
        model = scripted(lambda messages, tools: plan[(len(messages) - 1) // 2])
    return pkg.Agent(name="bench", model=model, tools=[fetch], max_steps=n + 1)


async def one(pkg, n, workdir):
    if workload == "steps":
        sqlite = importlib.import_module(pkg.__name__ + ".storage.sqlite.store")
        store = await sqlite.SqliteSessionStore.open(Path(workdir) / f"b{time.monotonic_ns()}.db", durability="normal")
    else:
        store = pkg.InMemorySessionStore()
    try:
        session = pkg.Session(store=store, agent=make_agent(pkg, n))
        gc.collect()
        start, cpu = time.perf_counter(), time.process_time()
        result = await session.start("Fetch every record, one tool call at a time.")
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    finally:
        await store.close()
    if result.status != "done" or result.state.step_index != n + 1:
        raise SystemExit(f"run ended wrongly: {result.status} at {result.state.step_index}")
    return cpu_seconds * 1e6 / (n + 1), seconds * 1e6 / (n + 1)


def hook_costs():
    """The tracing calls of one step and of one drive, alone, with no provider (ns)."""
    from repertory.core.messages import ModelMessage, ToolResultPart
    from repertory.core.model import ModelResponse, ModelSettings
    from repertory.core.state import RunState
    from repertory.tracing import chat_span, drive_span, tool_span
    configure("off")
    settings = ModelSettings()
    response = ModelResponse(message=ModelMessage.user("x"))
    part = ToolResultPart(tool_call_id="c", tool_name="fetch", result="r")
    args = {"i": 1}
    agent = make_agent(repertory, 1)
    run = RunState(run_id="r", thread_id="t")
    def step():
        with chat_span(agent.model, settings, list) as span:
            span.response(response)
        with tool_span("fetch", "c", args) as span:
            span.outcome(part, None, False)
    def drive():
        with drive_span(run, agent, [], "start"):
            pass
    with drive_span(run, agent, [], "start"):
        step_ns = min(timeit.repeat(step, number=100_000, repeat=5)) / 100_000 * 1e9
    drive_ns = min(timeit.repeat(drive, number=20_000, repeat=5)) / 20_000 * 1e9
    return {"step_hooks_ns": step_ns, "drive_hook_ns": drive_ns}


async def extra_frame_ns():
    """What one more coroutine layer costs (the engine gained two a step: request and _run_one wrap a body)."""
    async def inner():
        return 1
    async def outer():
        return await inner()
    best = {inner: float("inf"), outer: float("inf")}
    for _ in range(5):
        for f in (inner, outer):
            start = time.thread_time()
            for _ in range(50_000):
                await f()
            best[f] = min(best[f], (time.thread_time() - start) / 50_000 * 1e9)
    return best[outer] - best[inner]


async def main():
    modes = ["off", "on", "sdk-floor"]
    if with_baseline:
        modes.insert(0, "baseline")
    cpu = {m: [] for m in modes + ["on+content"]}
    wall = {m: [] for m in modes + ["on+content"]}
    spans = {}

    async def timed(mode, workdir):
        configure(mode)
        c, w = await one(builds["baseline" if mode == "baseline" else "current"], steps, workdir)
        cpu[mode].append(c)
        wall[mode].append(w)
        if mode not in ("off", "baseline"):
            spans[mode] = len(exporter.get_finished_spans())

    with tempfile.TemporaryDirectory() as workdir:
        for mode in modes:
            configure(mode)
            await one(builds["baseline" if mode == "baseline" else "current"], min(steps, 50), workdir)
        for i in range(runs):
            for mode in modes[i % len(modes):] + modes[: i % len(modes)]:
                await timed(mode, workdir)
        # Last, and apart: its spans hold the whole conversation each, and the memory they take
        # would weigh on whatever ran after them.
        for _ in range(max(1, runs // 2)):
            await timed("on+content", workdir)
    configure("off")
    frame_ns = await extra_frame_ns()
    hooks = hook_costs()
    hooks["extra_frame_ns"] = frame_ns
    hooks["sdk_span_us_in_run"] = bare_time[0] / bare_time[1] * 1e6 if bare_time[1] else None
    print(json.dumps({"cpu": {m: v for m, v in cpu.items() if v}, "wall": {m: v for m, v in wall.items() if v},
                      "spans_per_run": spans, "hooks": hooks, "files": {k: v.__file__ for k, v in builds.items()}}))

asyncio.run(main())
'''


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def baseline_ref() -> str:
    """The parent of the commit that added ``repertory/tracing/__init__.py``: the tree without tracing calls."""
    added = _git("log", "--diff-filter=A", "--format=%H", "-1", "--", "repertory/tracing/__init__.py")
    if not added:
        raise RuntimeError("no commit adds repertory/tracing/__init__.py here; pass --baseline REF")
    return f"{added}^"


def export_tree(ref: str, into: Path) -> str:
    """``repertory/`` as of ``ref``, unpacked as the package ``repertory_baseline`` under ``into``.

    Its own imports are rewritten (``repertory`` -> ``repertory_baseline``, in import statements
    and ``importlib`` strings) so it loads beside this tree in one process. Returns the commit.
    """
    commit = _git("rev-parse", ref)
    archive = into / "baseline.tar"
    with archive.open("wb") as fh:
        subprocess.run(["git", "archive", commit, "repertory"], cwd=ROOT, stdout=fh, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    archive.unlink()
    package = into / BASELINE_PACKAGE
    (into / "repertory").rename(package)
    statement = re.compile(r"^(\s*)(from|import) repertory(?=[.\s])", re.MULTILINE)
    quoted = re.compile(r"([\"'])repertory\.")
    for path in package.rglob("*.py"):
        text = path.read_text()
        text = statement.sub(rf"\1\2 {BASELINE_PACKAGE}", text)
        path.write_text(quoted.sub(rf"\1{BASELINE_PACKAGE}.", text))
    return commit


def measure(baseline: Path | None, workload: str, steps: int, runs: int) -> dict[str, Any]:
    """One child process: ``runs`` passes over every configuration of ``workload``, alternating."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (ROOT, baseline) if p is not None)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, workload, str(steps), str(runs), "1" if baseline else "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{workload} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    here = str(ROOT / "repertory")
    if not result["files"]["current"].startswith(here):
        raise RuntimeError(f"the child imported {result['files']['current']}, not this tree's repertory")
    return result


def run(steps: int, rounds: int, runs: int, baseline: str | None) -> dict[str, Any]:
    """``rounds`` child processes per workload; return the report."""
    machine: dict[str, Any] = {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu_count": os.cpu_count(),
        "load_average_before": list(os.getloadavg()),
    }
    try:
        machine["git_commit"] = _git("rev-parse", "HEAD")
        machine["repertory_tree_dirty"] = bool(_git("status", "--porcelain", "--", "repertory"))
    except (OSError, subprocess.CalledProcessError):
        machine["git_commit"] = None
    samples: dict[tuple[str, str], list[float]] = {(m, w): [] for m in MODES for w in WORKLOADS}
    wall: dict[tuple[str, str], list[float]] = {(m, w): [] for m in MODES for w in WORKLOADS}
    extra: dict[str, Any] = {"spans_per_run": {}, "hooks": []}
    skipped: str | None = None
    with tempfile.TemporaryDirectory(prefix="repertory-tracing-bench-") as tmp:
        tree: Path | None = None
        try:
            ref = baseline or baseline_ref()
            extra["baseline_commit"] = export_tree(ref, Path(tmp))
            extra["baseline_ref"] = ref
            tree = Path(tmp)
        except (OSError, RuntimeError, subprocess.CalledProcessError) as exc:
            skipped = f"baseline not measured: {exc}"
            print(f"  {skipped}", file=sys.stderr)
        for rnd in range(rounds):
            for workload in WORKLOADS:
                got = measure(tree, workload, steps, runs)
                for mode, values in got["cpu"].items():
                    samples[(mode, workload)].extend(values)
                    wall[(mode, workload)].extend(got["wall"][mode])
                for mode, count in got["spans_per_run"].items():
                    extra["spans_per_run"][f"{mode}/{workload}"] = count
                extra["hooks"].append(got["hooks"])
                line = ", ".join(f"{m} {statistics.median(v):.1f}" for m, v in got["cpu"].items())
                print(f"  round {rnd + 1}/{rounds} {workload:6} median CPU us/step: {line}", file=sys.stderr)
    machine["load_average_after"] = list(os.getloadavg())
    extra["wall_us_per_step_median"] = {f"{m}/{w}": statistics.median(v) for (m, w), v in wall.items() if v}
    extra["wall_samples"] = {f"{m}/{w}": v for (m, w), v in wall.items() if v}
    return summarise(samples, extra, steps, rounds, runs, machine, skipped)


def _paired(by: dict[str, list[float]], a: str, b: str, relative: bool) -> float | None:
    """Median over passes of ``a - b`` (in % of ``b`` if ``relative``): runs of one pass ran back to back."""
    if a not in by or b not in by:
        return None
    pairs = zip(by[a], by[b], strict=True)
    return statistics.median([(x - y) / y * 100 if relative else x - y for x, y in pairs])


def _direct_pct(hooks: list[dict[str, float]], samples: dict[tuple[str, str], list[float]]) -> dict[str, float]:
    """The tracing calls of a step plus its two extra coroutine frames, in % of each workload's baseline step."""
    if not hooks:
        return {}
    step_ns = min(h["step_hooks_ns"] for h in hooks) + 2 * max(min(h["extra_frame_ns"] for h in hooks), 0.0)
    out: dict[str, float] = {}
    for workload in WORKLOADS:
        base = samples.get(("baseline", workload))
        if base:
            out[workload] = step_ns / 1000 / statistics.median(base) * 100
    return out


def summarise(
    samples: dict[tuple[str, str], list[float]],
    extra: dict[str, Any],
    steps: int,
    rounds: int,
    runs: int,
    machine: dict[str, Any],
    skipped: str | None,
) -> dict[str, Any]:
    """Medians per mode and workload, and the two targets read off them."""
    rows: list[dict[str, Any]] = []
    for workload in WORKLOADS:
        med = {m: statistics.median(v) for (m, w), v in samples.items() if w == workload and v}
        low = {m: min(v) for (m, w), v in samples.items() if w == workload and v}
        spread = {
            m: (statistics.quantiles(v, n=4)[0], statistics.quantiles(v, n=4)[2]) if len(v) > 1 else (v[0], v[0])
            for (m, w), v in samples.items()
            if w == workload and v
        }
        by = {m: v for (m, w), v in samples.items() if w == workload and v}
        off_pct = _paired(by, "off", "baseline", True)
        on_us = _paired(by, "on", "off", False)
        rows.append(
            {
                "workload": workload,
                "us_per_step_median": med,
                "us_per_step_min": low,
                "us_per_step_quartiles": spread,
                "off_vs_baseline_pct": off_pct,
                "off_vs_baseline_pct_of_minimums": None
                if "off" not in low or "baseline" not in low
                else (low["off"] - low["baseline"]) / low["baseline"] * 100,
                "on_minus_off_us_per_step": on_us,
                "sdk_floor_minus_off_us_per_step": _paired(by, "sdk-floor", "off", False),
                "on_minus_sdk_floor_us_per_step": _paired(by, "on", "sdk-floor", False),
                # Not paired: on+content runs after the passes (see the child), so medians are compared.
                "content_minus_off_us_per_step": None
                if "on+content" not in med or "off" not in med
                else med["on+content"] - med["off"],
                "meets_off": None if off_pct is None else off_pct <= TARGET_OFF_PCT,
                "meets_on": None if on_us is None else on_us <= TARGET_ON_US,
            }
        )
    hooks = extra.pop("hooks")
    return {
        "benchmark": "tracing",
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine,
        "steps": steps,
        "model_requests_per_run": steps + 1,
        "rounds": rounds,
        "runs_per_child": runs,
        "durability": "steps: SQLite WAL + synchronous=NORMAL; engine: in-memory store",
        "clock": "CPU time of the measuring process (all its threads), per model request; wall time is kept "
        "apart (wall_*)",
        "method": "both builds in one process, configurations alternating run by run (see the module docstring)",
        "targets": {"off_vs_baseline_pct_max": TARGET_OFF_PCT, "on_minus_off_us_max": TARGET_ON_US},
        "baseline": skipped or "measured",
        "rows": rows,
        "tracing_calls_off_ns": {
            "one_step": min(h["step_hooks_ns"] for h in hooks) if hooks else None,
            "one_drive": min(h["drive_hook_ns"] for h in hooks) if hooks else None,
            "extra_coroutine_frame": min(h["extra_frame_ns"] for h in hooks) if hooks else None,
        },
        # CPU time of one bare SDK span's start_span + end, timed inside the sdk-floor runs.
        "sdk_span_us_in_run_median": statistics.median(
            [h["sdk_span_us_in_run"] for h in hooks if h.get("sdk_span_us_in_run") is not None] or [float("nan")]
        ),
        "off_direct_cost_pct_of_baseline_step": _direct_pct(hooks, samples),
        **extra,
        "samples": {f"{m}/{w}": v for (m, w), v in samples.items() if v},
    }


def render(report: dict[str, Any]) -> str:
    """The summary table."""
    lines = [
        f"tracing: {report['steps']} tool steps + 1 reply a run, {report['rounds']} processes x "
        f"{report['runs_per_child']} alternating passes, median CPU us per model request",
        "",
        "| workload | baseline | off | on | sdk-floor | on+content | off vs baseline | on - off | sdk-floor - off "
        "| targets met |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]

    def us(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    for row in report["rows"]:
        med = row["us_per_step_median"]
        pct = row["off_vs_baseline_pct"]
        on = row["on_minus_off_us_per_step"]
        floor = row["sdk_floor_minus_off_us_per_step"]
        lines.append(
            f"| {row['workload']} | {us(med.get('baseline'))} | {us(med.get('off'))} | {us(med.get('on'))} | "
            f"{us(med.get('sdk-floor'))} | {us(med.get('on+content'))} | {'-' if pct is None else f'{pct:+.2f}%'} | "
            f"{'-' if on is None else f'{on:+.1f} us'} | {'-' if floor is None else f'{floor:+.1f} us'} | "
            f"off<=2%: {row['meets_off']}, on<=30us: {row['meets_on']} |"
        )
    calls = report["tracing_calls_off_ns"]
    if calls["one_step"] is not None:
        direct = ", ".join(f"{w} {p:.2f}%" for w, p in report["off_direct_cost_pct_of_baseline_step"].items())
        lines.append("")
        lines.append(
            f"tracing calls with no provider: {calls['one_step']:.0f} ns a step (chat + tool span) and two "
            f"coroutine frames of {calls['extra_coroutine_frame']:.0f} ns; {calls['one_drive']:.0f} ns a drive "
            f"(the provider lookup); of a baseline step: {direct}"
        )
        lines.append(
            f"one bare SDK span (start_span + end) inside the sdk-floor runs: "
            f"{report['sdk_span_us_in_run_median']:.1f} us"
        )
    if report["baseline"] != "measured":
        lines.append(report["baseline"])
    return "\n".join(lines)


class TracingReport(Report):
    """``benchmarks/results/tracing.json``: per workload, CPU us per model request under each configuration."""

    steps: int
    model_requests_per_run: int
    rounds: int
    runs_per_child: int
    durability: str
    clock: str
    method: str
    targets: dict[str, float]
    baseline: str
    workloads: list[dict[str, Any]]  # ``rows`` in the JSON of ``run`` (a Report's ``rows()`` is its summary)
    tracing_calls_off_ns: dict[str, float | None]
    sdk_span_us_in_run_median: float
    off_direct_cost_pct_of_baseline_step: dict[str, float]
    spans_per_run: dict[str, Any] = Field(default_factory=dict)
    baseline_commit: str | None = None
    baseline_ref: str | None = None
    wall_us_per_step_median: dict[str, float] = Field(default_factory=dict)
    wall_samples: dict[str, list[float]] = Field(default_factory=dict)
    samples: dict[str, list[float]] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _mode_from_steps(cls, data: Any) -> Any:
        # The report said no mode before it was typed: a run of the default length is a full one.
        if isinstance(data, dict) and "rows" in data and "workloads" not in data:
            data = {k: v for k, v in data.items() if k != "rows"} | {"workloads": data["rows"]}
        if isinstance(data, dict) and "mode" not in data and isinstance(data.get("steps"), int):
            return {**data, "mode": "full" if data["steps"] >= DEFAULT_STEPS else "quick"}
        return data

    def summarise(self) -> list[Row]:
        """Per workload: tracing off against the build without it (%), and on over off (us a step)."""
        out: list[Row] = []
        for r in self.workloads:
            w = r["workload"]
            out.append(summary_row(f"tracing off vs no tracing code, {w} workload", r["off_vs_baseline_pct"], "%",
                           TARGET_OFF_PCT, note=f"baseline: {self.baseline}"))  # fmt: skip
            out.append(summary_row(f"tracing on minus off, {w} workload", r["on_minus_off_us_per_step"], "us/step",
                           TARGET_ON_US, note=f"the SDK's two bare spans alone: "
                           f"{r['sdk_floor_minus_off_us_per_step'] or 0:.1f} us"))  # fmt: skip
        return out

    def render(self) -> str:
        """The summary table."""
        data = self.model_dump(mode="json")
        return render({**data, "rows": data["workloads"]})


REPORT = TracingReport
PLOTS: list[Any] = []


def typed(report: dict[str, Any], quick: bool) -> TracingReport:
    """The report ``run`` returns, typed (its mode said, its summary rows worked out)."""
    out = TracingReport.model_validate({**report, "mode": mode_of(quick)})
    out.summary = out.summarise()
    return out


def run_suite(quick: bool, out_dir: Path = RESULTS.parent, peers: bool = True) -> TracingReport:
    """The suite's entry: measure, print, write ``out_dir/tracing.json`` (``peers``: there are none here)."""
    report = run(QUICK_STEPS, 1, 1, None) if quick else run(DEFAULT_STEPS, DEFAULT_ROUNDS, DEFAULT_RUNS, None)
    out = typed(report, quick)
    deliver(out, out_dir / "tracing.json")
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """Parse arguments, measure, print the table and write the JSON report."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tracing", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_STEPS} steps, one round, one run (a smoke run)")
    parser.add_argument("--steps", type=int, default=None, help=f"tool steps per run (default {DEFAULT_STEPS:,})")
    parser.add_argument("--rounds", type=int, default=None, help=f"rounds over every build (default {DEFAULT_ROUNDS})")
    parser.add_argument("--runs", type=int, default=None, help=f"timed runs per child process (default {DEFAULT_RUNS})")
    parser.add_argument("--baseline", default=None, help="git ref of the build without tracing (default: found)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"JSON report path (default: {RESULTS})")
    args = parser.parse_args(argv)
    steps = args.steps if args.steps is not None else (QUICK_STEPS if args.quick else DEFAULT_STEPS)
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else DEFAULT_ROUNDS)
    runs = args.runs if args.runs is not None else (1 if args.quick else DEFAULT_RUNS)
    if steps < 1 or rounds < 1 or runs < 1:
        parser.error("--steps, --rounds and --runs must be >= 1")
    quick = args.quick or steps < DEFAULT_STEPS
    deliver(typed(run(steps, rounds, runs, args.baseline), quick), args.out)


if __name__ == "__main__":
    main()
