"""A2A server overhead: an agent's turn as a blocking ``SendMessage`` to ``repertory serve`` against ``handle.run()``.

Run ``python -m benchmarks.a2a_server [--quick] [--out PATH]``; it prints the figures and writes
``benchmarks/results/a2a_server.json``. Nothing here asserts a speed. The target read against:
A2A adds at most 3 ms (p50) to a turn on loopback.

One agent (``benchmarks.harness.echo:agents``: a zero-delay ``ScriptedModel`` that answers at once,
no tools), two ways, each on its own fresh SQLite file (WAL, durability normal), in interleaved
blocks so a busy machine slows every kind alike:

- ``direct``: ``await handle.run("ping")`` on a session of a ``Runtime`` in the benchmark process
  (local backend): the turn itself, through the session tree;
- ``a2a``: a send-and-wait round trip with ``a2a-sdk``'s client (not streaming, so ``SendMessage``
  blocks until the task rests) to ``repertory serve``'s ``/a2a/echo`` (a separate process, JSON-RPC
  over HTTP on loopback, keyless), the completed task's ``reply`` artifact checked.

Each kind continues one session (the A2A messages carry the first task's ``contextId``), so every
call is one turn of the same size as the direct run's, and one new task. The client resolves the
agent card once, before the clock starts. The figure against the target: ``p50(a2a) - p50(direct)``,
what the A2A layer (client, HTTP, the SDK's JSON-RPC dispatcher, our handler, the wait for the turn
and the task read back from the store) adds to the turn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.cli import suite_entry
from benchmarks.harness.report import RESULTS_DIR, Report, Row, row
from benchmarks.harness.stats import Dist

__all__ = ["NAME", "PLOTS", "REPORT", "A2aServerReport", "TARGET_ADDED_MS", "run_suite"]

NAME = "a2a_server"
PLOTS: list[Any] = []
TARGET_ADDED_MS = 3.0


class A2aServerReport(Report):
    """``benchmarks/results/a2a_server.json``."""

    store: str
    blocks: int
    calls_per_block: int
    direct: Dist
    """``handle.run()`` in process: one turn."""
    a2a: Dist
    """A blocking ``SendMessage`` through ``repertory serve``'s ``/a2a/echo`` on loopback."""
    a2a_added_p50_ms: float
    a2a_added_p99_ms: float

    def summarise(self) -> list[Row]:
        """What A2A adds to a turn at p50 against the target, with p99 and the raw figures."""
        d, a = self.direct, self.a2a
        return [
            row("A2A server: added to a turn (blocking SendMessage - handle.run()), p50",
                round(self.a2a_added_p50_ms, 2), "ms", TARGET_ADDED_MS,
                note=f"send p50 {a.p50_ms:.2f} / p99 {a.p99_ms:.2f} ms vs handle.run() p50 {d.p50_ms:.2f} / p99 "
                     f"{d.p99_ms:.2f} ms; added at p99 {self.a2a_added_p99_ms:.2f} ms; {a.count} calls")
        ]  # fmt: skip

    def render(self) -> str:
        """The summary lines printed after a run."""
        return "\n".join(f"  {r.figure}: {r.value} {r.unit}  {r.note}" for r in self.rows())


REPORT = A2aServerReport


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> Report:
    """The suite's entry: measure through a real server process, print, write ``out_dir/a2a_server.json``."""
    from benchmarks.a2a_server.measure import measure

    return suite_entry(NAME, measure, quick, out_dir)
