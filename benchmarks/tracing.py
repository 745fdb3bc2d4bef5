"""Tracing benchmark: what OpenTelemetry spans cost a step, off (no provider) and on (SDK), against no tracing code.

Run ``python -m benchmarks.tracing [--quick] [--steps N] [--rounds R] [--runs K] [--baseline REF]``. It prints a
table and writes ``benchmarks/results/tracing.json``. Nothing here asserts a speed (DESIGN.md,
rule 8): a figure over its target is a finding, not a failure.

Three builds run the same steps, side by side, in one invocation:

- ``baseline``: repertory as it was before ``repertory.tracing`` existed (``git archive`` of the
  parent of the commit that added ``repertory/tracing/__init__.py``, or ``--baseline REF``), so the
  engine makes no tracing calls at all. This is "today" for the "off costs nothing" target.
- ``off``: this tree, no tracer provider set (``opentelemetry-api`` is installed, as it is wherever
  ``anthropic`` is): the engine's tracing calls run and find nothing to record.
- ``on``: this tree with an SDK ``TracerProvider`` and a ``SimpleSpanProcessor`` into an
  ``InMemorySpanExporter`` (the export is part of the cost); ``on+content`` adds
  ``capture_content(True)``, which serialises every request's messages (informational, no target).
- ``sdk-floor``: as ``on``, but the engine's ``chat`` and ``execute_tool`` spans are replaced by bare
  SDK spans (a name, no attributes, no context): what the SDK charges for two spans a step at all,
  so ``on - sdk-floor`` is what repertory's attributes and context handling add on top.

Each measurement is a fresh child process (``python -c``, its working directory and ``PYTHONPATH``
the build's tree, and the child checks which ``repertory`` it imported), so the builds never share
an interpreter, and the order of the builds rotates round by round so a noisy neighbour on this
shared machine hits all of them alike. A child warms up with a short run, then times ``--runs``
runs of N tool steps plus a final reply, and reports microseconds per model request of CPU time
(``time.process_time``: every thread of the process, so SQLite's and the span processor's work
count). Wall time is recorded too, but this machine is shared (a load of ~8 on 2 cores is usual),
and there wall time is mostly the other processes: a 2% target cannot be read off it.

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
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main", "run_suite"]

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "tracing.json"
DEFAULT_STEPS = 500
QUICK_STEPS = 50
DEFAULT_ROUNDS = 7
DEFAULT_RUNS = 3
TARGET_OFF_PCT = 2.0
TARGET_ON_US = 30.0
WORKLOADS = ("steps", "engine")
MODES = ("baseline", "off", "on", "sdk-floor", "on+content")

# The child: measures one (build, mode, workload) and prints one JSON line. It imports nothing
# from benchmarks/, only the repertory of the tree it was started in.
CHILD = r'''
import asyncio, gc, json, os, random, string, sys, tempfile, time, timeit
from pathlib import Path

mode, workload, steps, runs, tree = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
import repertory
from repertory import Agent, InMemorySessionStore, Session, tool
from repertory.storage.sqlite.store import SqliteSessionStore
from repertory.testing import ScriptedModel

where = os.path.realpath(repertory.__file__)
if not where.startswith(os.path.realpath(tree) + os.sep):
    raise SystemExit(f"imported {where}, not the repertory of {tree}")
exporter = None
if mode.startswith("on"):
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    if mode == "on+content":
        from repertory.tracing import capture_content
        capture_content(True)
    if mode == "sdk-floor":
        # The SDK's own price of two spans a step: the engine's chat and tool spans replaced by
        # bare ones (no attributes, no context), everything else as in "on".
        import repertory.runtime._calls as calls_module
        import repertory.runtime._loop as loop_module

        bare_tracer = provider.get_tracer("bench")

        class Bare:
            def __init__(self, name):
                self.name = name
            def __enter__(self):
                self.span = bare_tracer.start_span(self.name)
                return self
            def __exit__(self, *exc):
                self.span.end()
            def response(self, response):
                pass
            def outcome(self, *args):
                pass

        loop_module.chat_span = lambda *args: Bare("chat")
        calls_module.tool_span = lambda *args: Bare("execute_tool")

FILLER = "".join(random.Random(1).choices(string.ascii_letters + " ", k=1000))
USAGE = {"input_tokens": 100, "output_tokens": 20}

def make_agent(n):
    idempotent = workload == "engine"
    @tool(name="fetch", idempotent=idempotent)
    async def fetch(i: int) -> str:
        """Fetch record i."""
        prefix = f"record {i:06d}: "
        return prefix + FILLER[len(prefix):]
    if workload == "steps":
        model = ScriptedModel([{"tool": "fetch", "args": {"i": k}} for k in range(n)] + [{"text": "done"}])
    else:
        plan = [{"tool": "fetch", "args": {"i": k}, "usage": USAGE} for k in range(n)]
        plan.append({"text": "done", "usage": USAGE})
        model = ScriptedModel(lambda messages, tools: plan[(len(messages) - 1) // 2])
    return Agent(name="bench", model=model, tools=[fetch], max_steps=n + 1)

async def one(n, workdir):
    if workload == "steps":
        store = await SqliteSessionStore.open(Path(workdir) / f"b{time.monotonic_ns()}.db", durability="normal")
    else:
        store = InMemorySessionStore()
    try:
        session = Session(store=store, agent=make_agent(n))
        gc.collect()
        start, cpu = time.perf_counter(), time.process_time()
        result = await session.start("Fetch every record, one tool call at a time.")
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    finally:
        await store.close()
    if result.status != "done" or result.state.step_index != n + 1:
        raise SystemExit(f"run ended wrongly: {result.status} at {result.state.step_index}")
    return cpu_seconds * 1e6 / (n + 1), seconds * 1e6 / (n + 1)

async def main():
    with tempfile.TemporaryDirectory() as workdir:
        await one(min(steps, 50), workdir)
        out, wall = [], []
        spans = 0
        for _ in range(runs):
            if exporter is not None:
                exporter.clear()
            cpu_us, wall_us = await one(steps, workdir)
            out.append(cpu_us)
            wall.append(wall_us)
            if exporter is not None:
                spans = len(exporter.get_finished_spans())
    hooks = None
    if mode == "off":
        from repertory.core.messages import ModelMessage, ToolResultPart
        from repertory.core.model import ModelResponse, ModelSettings
        from repertory.core.state import RunState
        from repertory.tracing import chat_span, drive_span, tool_span
        settings = ModelSettings()
        response = ModelResponse(message=ModelMessage.user("x"))
        part = ToolResultPart(tool_call_id="c", tool_name="fetch", result="r")
        args = {"i": 1}
        agent = make_agent(1)
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
            n = 200_000
            step_ns = min(timeit.repeat(step, number=n, repeat=5)) / n * 1e9
        drive_ns = min(timeit.repeat(drive, number=50_000, repeat=5)) / 50_000 * 1e9
        hooks = {"step_hooks_ns": step_ns, "drive_hook_ns": drive_ns}
    print(json.dumps({"repertory": where, "us_per_step": out, "wall_us_per_step": wall, "spans_per_run": spans,
                      "hooks": hooks}))

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
    """``repertory/`` as of ``ref``, unpacked under ``into``; returns the commit it resolved to."""
    commit = _git("rev-parse", ref)
    archive = into / "baseline.tar"
    with archive.open("wb") as fh:
        subprocess.run(["git", "archive", commit, "repertory"], cwd=ROOT, stdout=fh, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    archive.unlink()
    return commit


def measure(tree: Path, mode: str, workload: str, steps: int, runs: int) -> dict[str, Any]:
    """One child process: ``runs`` timed runs of ``workload`` under ``mode`` with the repertory of ``tree``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(tree)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, mode, workload, str(steps), str(runs), str(tree)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{mode}/{workload} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def run(steps: int, rounds: int, runs: int, baseline: str | None) -> dict[str, Any]:
    """Measure every mode and workload, ``rounds`` times, rotating the order; return the report."""
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
        trees: dict[str, Path] = {"off": ROOT, "on": ROOT, "sdk-floor": ROOT, "on+content": ROOT}
        try:
            ref = baseline or baseline_ref()
            extra["baseline_commit"] = export_tree(ref, Path(tmp))
            extra["baseline_ref"] = ref
            trees["baseline"] = Path(tmp)
        except (OSError, RuntimeError, subprocess.CalledProcessError) as exc:
            skipped = f"baseline not measured: {exc}"
            print(f"  {skipped}", file=sys.stderr)
        modes = [m for m in MODES if m in trees]
        for rnd in range(rounds):
            order = modes[rnd % len(modes) :] + modes[: rnd % len(modes)]
            for workload in WORKLOADS:
                for mode in order:
                    got = measure(trees[mode], mode, workload, steps, runs)
                    samples[(mode, workload)].extend(got["us_per_step"])
                    wall[(mode, workload)].extend(got["wall_us_per_step"])
                    if got["spans_per_run"]:
                        extra["spans_per_run"][f"{mode}/{workload}"] = got["spans_per_run"]
                    if got["hooks"]:
                        extra["hooks"].append(got["hooks"])
                    print(
                        f"  round {rnd + 1}/{rounds} {workload:6} {mode:10} "
                        + " ".join(f"{v:7.1f}" for v in got["us_per_step"])
                        + " CPU us/step (wall "
                        + " ".join(f"{v:.1f}" for v in got["wall_us_per_step"])
                        + ")",
                        file=sys.stderr,
                    )
    machine["load_average_after"] = list(os.getloadavg())
    extra["wall_us_per_step_median"] = {f"{m}/{w}": statistics.median(v) for (m, w), v in wall.items() if v}
    extra["wall_samples"] = {f"{m}/{w}": v for (m, w), v in wall.items() if v}
    return summarise(samples, extra, steps, rounds, runs, machine, skipped)


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
        off, on, base = med.get("off"), med.get("on"), med.get("baseline")
        off_pct = None if off is None or base is None else (off - base) / base * 100
        on_us = None if off is None or on is None else on - off
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
                "sdk_floor_minus_off_us_per_step": None
                if off is None or "sdk-floor" not in med
                else med["sdk-floor"] - off,
                "content_minus_off_us_per_step": None
                if off is None or "on+content" not in med
                else med["on+content"] - off,
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
        "apart (wall_*): on a shared machine it measures the other processes as much as this one",
        "targets": {"off_vs_baseline_pct_max": TARGET_OFF_PCT, "on_minus_off_us_max": TARGET_ON_US},
        "baseline": skipped or "measured",
        "rows": rows,
        "tracing_calls_off_ns": {
            "one_step": min(h["step_hooks_ns"] for h in hooks) if hooks else None,
            "one_drive": min(h["drive_hook_ns"] for h in hooks) if hooks else None,
        },
        **extra,
        "samples": {f"{m}/{w}": v for (m, w), v in samples.items() if v},
    }


def render(report: dict[str, Any]) -> str:
    """The summary table."""
    lines = [
        f"tracing: {report['steps']} tool steps + 1 reply a run, {report['rounds']} rounds x "
        f"{report['runs_per_child']} runs, median CPU us per model request",
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
        lines.append("")
        lines.append(
            f"tracing calls with no provider: {calls['one_step']:.0f} ns a step (chat + tool span), "
            f"{calls['one_drive']:.0f} ns a drive (the provider lookup)"
        )
    if report["baseline"] != "measured":
        lines.append(report["baseline"])
    return "\n".join(lines)


def run_suite(quick: bool, out_dir: Path = RESULTS.parent, peers: bool = True) -> dict[str, Any]:
    """The suite's entry: measure, print, write ``out_dir/tracing.json`` (``peers``: there are none here)."""
    report = run(QUICK_STEPS, 1, 1, None) if quick else run(DEFAULT_STEPS, DEFAULT_ROUNDS, DEFAULT_RUNS, None)
    print(render(report))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "tracing.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


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
    if shutil.which("git") is None and args.baseline is not None:
        parser.error("--baseline needs git")
    report = run(steps, rounds, runs, args.baseline)
    print(render(report))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
