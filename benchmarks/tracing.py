"""Tracing: what OpenTelemetry spans cost a step, off (no provider) and on (SDK), against no tracing code.

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

How, and why so: on a shared machine two child processes measuring the same code differ by 10-30%,
far more than the 2% to be read, so pyperf's worker processes cannot compare them. Both builds run
in one process and the configurations alternate run by run (rotating their order), and the figures
compare runs that saw the same machine. The baseline tree is unpacked as the package
``repertory_baseline`` (its ``import repertory...`` statements rewritten), so it and this tree are
separate packages side by side; the provider is switched between runs by resetting the API's
global (what OpenTelemetry's own test utilities do). Each of ``--rounds`` child processes warms
up, then times ``--runs`` passes over the configurations, in CPU time per model request
(``time.process_time``: every thread of the process, so SQLite's and the span processor's work
count; wall time is recorded too).

The workloads, both of ``Session.start()`` as in ``benchmarks.steps``:

- ``steps``: the step benchmark's headline: ``ScriptedModel(list)``, the default ``@tool`` (two
  commits a step), ``SqliteSessionStore`` with ``durability="normal"``.
- ``engine``: the cheapest step there is, where a fixed cost per step weighs most: a step-function
  ``ScriptedModel`` with usage given, ``@tool(idempotent=True)`` (one commit), ``InMemorySessionStore``.

Targets: ``off`` within 2% of ``baseline`` (the paired ratio at most 1.02x); ``on`` at most 30 us a
step more than ``off``. The child also times the tracing calls of one step alone (``chat_span`` and
``tool_span`` with their methods, inside a drive with tracing off): the direct cost the 2% is about.

``python -m benchmarks.tracing [--quick] [--steps N] [--rounds R] [--runs K] [--baseline REF]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness.command import Options, main
from benchmarks.harness.figures import Figures, Target
from benchmarks.harness.versions import ROOT

SIZES = {"full": (500, 4, 5), "quick": (50, 1, 1)}
"""Tool steps per run, rounds (child processes per workload), timed passes per child."""
WORKLOADS = ("steps", "engine")
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
        text = statement.sub(rf"\1\2 {BASELINE_PACKAGE}", path.read_text())
        path.write_text(quoted.sub(rf"\1{BASELINE_PACKAGE}.", text))
    return commit


def _child(baseline: Path | None, workload: str, steps: int, runs: int) -> dict[str, Any]:
    """One child process: ``runs`` passes over every configuration of ``workload``, alternating."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (ROOT, baseline) if p is not None)
    proc = subprocess.run([sys.executable, "-c", CHILD, workload, str(steps), str(runs), "1" if baseline else "0"],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=3600)  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"{workload} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    if not result["files"]["current"].startswith(str(ROOT / "repertory")):
        raise RuntimeError(f"the child imported {result['files']['current']}, not this tree's repertory")
    return result


def _paired(by: dict[str, list[float]], a: str, b: str, ratio: bool) -> float | None:
    """Median over passes of ``a / b`` (or ``a - b``): the runs of one pass ran back to back."""
    if a not in by or b not in by:
        return None
    return statistics.median([x / y if ratio else x - y for x, y in zip(by[a], by[b], strict=True)])


def _record(figures: Figures, workload: str, cpu: dict[str, list[float]], wall: dict[str, list[float]]) -> None:
    """One workload's figures: each configuration's samples, then the differences the targets read."""
    for mode, values in cpu.items():
        figures.time(f"{workload}: CPU per model request, {mode}", [v / 1e6 for v in values])
        figures.time(f"{workload}: wall time per model request, {mode}", [v / 1e6 for v in wall[mode]])
    off = _paired(cpu, "off", "baseline", True)
    if off is not None:
        figures.value(f"{workload}: CPU per request, tracing off / no tracing code", off, "x", target=Target(1.02),
                      note="paired by pass; target: off within 2% of the build without tracing")  # fmt: skip
        figures.value(f"{workload}: CPU per request, tracing off / no tracing code, of the minimums",
                      min(cpu["off"]) / min(cpu["baseline"]), "x")  # fmt: skip
    for a, b, target in (("on", "off", Target(30e-6)), ("sdk-floor", "off", None), ("on", "sdk-floor", None)):
        diff = _paired(cpu, a, b, False)
        if diff is not None:
            figures.time(f"{workload}: tracing {a} minus {b}, CPU a request", diff / 1e6, target=target,
                         note="paired by pass")  # fmt: skip
    if "on+content" in cpu and "off" in cpu:  # not paired: on+content runs after the passes (see the child)
        content = statistics.median(cpu["on+content"]) - statistics.median(cpu["off"])
        figures.time(f"{workload}: tracing on+content minus off, CPU a request", content / 1e6, note="medians")


def scenario(figures: Figures, options: Options) -> None:
    """``rounds`` child processes per workload, the baseline exported first; every figure recorded."""
    args = options.args
    steps, rounds, runs = (given or size for given, size in zip((args.steps, args.rounds, args.runs),
                                                                SIZES[options.mode], strict=True))  # fmt: skip
    figures.fact("runs", f"{steps} tool steps + 1 reply a run, {rounds} processes x {runs} alternating passes")
    figures.fact("stores", "steps: SQLite WAL + synchronous=NORMAL; engine: in-memory store")
    figures.fact("clock", "CPU time of the measuring process (all its threads) per model request; wall apart")
    cpu: dict[str, dict[str, list[float]]] = {w: {} for w in WORKLOADS}
    wall: dict[str, dict[str, list[float]]] = {w: {} for w in WORKLOADS}
    hooks: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="repertory-tracing-bench-") as tmp:
        tree: Path | None = None
        try:
            ref = args.baseline or baseline_ref()
            figures.fact("baseline", f"{ref} ({export_tree(ref, Path(tmp))[:12]})")
            tree = Path(tmp)
        except (OSError, RuntimeError, subprocess.CalledProcessError) as exc:
            figures.fact("baseline", f"not measured: {exc}")
        for rnd in range(rounds):
            for workload in WORKLOADS:
                got = _child(tree, workload, steps, runs)
                for mode, values in got["cpu"].items():
                    cpu[workload].setdefault(mode, []).extend(values)
                    wall[workload].setdefault(mode, []).extend(got["wall"][mode])
                hooks.append(got["hooks"])
                if rnd == rounds - 1:
                    for mode, count in got["spans_per_run"].items():
                        figures.count(f"{workload}: spans a run, {mode}", count)
                line = ", ".join(f"{m} {statistics.median(v):.1f}" for m, v in got["cpu"].items())
                print(f"  round {rnd + 1}/{rounds} {workload:6} median CPU us/step: {line}", flush=True)
    for workload in WORKLOADS:
        _record(figures, workload, cpu[workload], wall[workload])
    step_ns, frame_ns = min(h["step_hooks_ns"] for h in hooks), min(h["extra_frame_ns"] for h in hooks)
    figures.time("tracing calls of one step, no provider (chat + tool span)", step_ns / 1e9)
    figures.time("tracing call of one drive, no provider (the provider lookup)",
                 min(h["drive_hook_ns"] for h in hooks) / 1e9)  # fmt: skip
    figures.time("one more coroutine frame (the engine gained two a step)", frame_ns / 1e9)
    bare = [h["sdk_span_us_in_run"] for h in hooks if h.get("sdk_span_us_in_run") is not None]
    if bare:
        figures.time("one bare SDK span (start_span + end) in the sdk-floor runs", statistics.median(bare) / 1e6)
    for workload in WORKLOADS:
        if "baseline" in cpu[workload]:
            direct_us = (step_ns + 2 * max(frame_ns, 0.0)) / 1000
            figures.value(f"{workload}: tracing calls and frames of a step, no provider, of a baseline step",
                          direct_us / statistics.median(cpu[workload]["baseline"]) * 100, "%")  # fmt: skip


def _args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=int, help="tool steps per run (full 500, quick 50)")
    parser.add_argument("--rounds", type=int, help="child processes per workload (full 4, quick 1)")
    parser.add_argument("--runs", type=int, help="timed passes per child (full 5, quick 1)")
    parser.add_argument("--baseline", help="git ref of the build without tracing (default: found)")


if __name__ == "__main__":
    main("tracing", __doc__, scenario=scenario, add_args=_args)
