"""Ray backend benchmark: turn overhead, host throughput, creations, memory, event latency, host crash.

Run ``python -m benchmarks.ray [--quick] [--only overhead,load,create,memory,events,crash]``. It
prints a table and writes ``benchmarks/results/ray.json`` with the machine, the versions, the
durability, the targets, every figure and whether each target is met. Nothing here asserts a speed
or a size.

One local Ray instance (``ray.init(address="local", num_cpus=2)``) is started by this script and
shut down by it at the end, and only it: Ray is never stopped machine-wide. Each part opens its own
runtime on a fresh SQLite file (WAL, ``synchronous=NORMAL``) in a temporary folder, with one shared
host (``hosts=1``: every figure is "through one host") and ``keep_hosts=False``, so its detached
host and supervisor are killed when the part closes. The model is a zero-delay ``ScriptedModel``
that answers every request with one short text reply, so a turn is one model step.

The host is ``BenchHost`` (``benchmarks.ray.host``), a ``SessionHost`` subclass created under the
name (and namespace) the runtime derives from the store URL, with the runtime's actor options,
before ``Runtime.start``, which then finds it (``get_if_exists``) and uses it as its own. It adds
methods only: event stamps, a one-hop ``run_turn`` prototype, cProfile on the host's event loop
thread, boot times. Every product path (``handle.run``, ``send``, ``events``, creation, restart)
is the product's own code.

1. Turn overhead: wall time of ``await handle.run(...)``, one at a time, round-robin over a few
   sessions, through Ray and on the local backend (same store, same agent), split into ``send()``
   (durable turn row) and ``result()`` (``wait_turn``, then three reads of the client's own store
   connection). Beside it: a bare Ray round trip (``host.ping``: the floor of one hop), the one-hop
   prototype (send, wait and read the reply in the host: one Ray call per turn), ``run_turn``
   timed inside the host (a turn's own work there, without the call), and ``send()`` of a turn
   that only queues (its session busy) next to one whose turn starts at once. Both backends also
   time ``handle.run`` after the process idled 2 ms, as a Ray host idles between its calls: a turn
   back to back with the last finds its code and data in the CPU's caches and costs less (0.40-0.43
   against 0.54-0.61 ms locally on 2026-12-04), so the overhead is given both ways.
2. Turns/s per host under load: N sessions each run T turns one after another, all N at once, three
   ways: ``handle.run`` (the product path: concurrent runs queued in batches, one Ray call per batch,
   results back on the client's event channel), the same
   work queued with the host's ``send_many`` in batches of 256 (completion read from the store: the
   host's own capacity without per-turn calls), and the one-hop prototype. CPU seconds of the
   client, the host, Ray's other processes and unrelated processes are read from /proc over each
   timed window. A smaller run is profiled with cProfile on both sides (the client's and the host's
   event loop threads; Ray's C++ threads and the store's writer thread are not seen by cProfile:
   their cost shows in the CPU seconds).
3. Session creations through one host: ``rt.create_session`` one at a time and 100 at once (client
   -> supervisor -> host: two Ray hops), the host's ``create_session`` called directly (one hop),
   and its ``create_sessions(batch)`` (100 and 1,000 a call, the host profiled over a few batches);
   next to one dedicated Ray actor per session (a trivial ``@ray.remote`` class: the first five one
   at a time, the rest all at once; memory of each process from smaps_rollup) and a few real
   ``placement="dedicated"`` sessions (a ``SessionHost`` process of their own).
4. Memory per idle hosted session: the host's VmRSS (``/proc/<pid>/status``, pid from ``ping()``)
   after a warm-up, after N sessions are created (rows only), activated (``metadata()`` brings each
   ``SessionActor`` into memory), after one turn each, and after ``passivate_idle(0)``; growth / N.
5. Event latency: from an event being published in the host (the bus publishes right after the
   commit that makes it durable; a listener stamps ``time.time()``) to the client receiving it from
   ``handle.events()`` (``time.time()``, same machine clock). The same figure from ``event.at``
   (epoch ms, set when the event is emitted, before its commit) is reported beside it. One session
   with turns one after another; the same stream while M unwatched sessions run turns; then M
   sessions each with its own stream, all running turns.
6. Host crash: N sessions are created and activated, then ``ray.kill(host, no_restart=False)``; once
   the old process is gone (``ray.kill`` only asks; until then the old process may still answer),
   the time from the kill until the first call on one of its sessions is served: ``handle.metadata()``
   and ``handle.run()`` through the client (its own retry and back-off), and the host's ``metadata``
   retried every 10 ms through the bare actor handle. Sessions are re-activated before each kill.

Node hard failure (a multi-node ``ray.cluster_utils.Cluster``, a node killed, its sessions served
elsewhere; target <= 5 s) is measured by ``benchmarks/ray_failover.py``, which needs a cluster of
its own.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.harness.cli import deliver
from benchmarks.harness.plots import Plot
from benchmarks.harness.report import RESULTS_DIR
from benchmarks.ray.report import RayReport

__all__ = ["NAME", "PLOTS", "REPORT", "run_suite"]

NAME = "ray"
REPORT = RayReport
PLOTS: list[Plot[RayReport]] = []


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> RayReport:
    """The suite's entry: start a local Ray, measure every part, print, write ``out_dir/ray.json``."""
    from benchmarks.ray.run import measure

    report = measure(quick)
    deliver(report, out_dir / f"{NAME}.json")
    return report
