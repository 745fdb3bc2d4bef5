"""SSE readers benchmark: 1,000 readers of ``GET /threads/{id}/events`` on one server following 100 streaming sessions.

Run ``python -m benchmarks.sse_readers [--quick] [--out PATH]``; it prints the figures and writes
``benchmarks/results/sse_readers.json``. Nothing here asserts a speed.

One ``repertory serve`` process (local backend, a fresh SQLite file, WAL, durability normal)
serves ``benchmarks.sse_readers.serve:agents``: a scripted model that streams each reply as 50
text deltas 60 ms apart (a 3 s reply), with durable deltas on (the default ``DeltaWindow``), so
the stream carries the stored, coalesced delta events. The server runs with ``--max-streams``
raised to the readers' count plus a margin: its default (16 open streams per key,
``ServerLimits.max_streams_per_key``) exists to stop one tenant holding a server's streams, and
here one key holds them all on purpose.

A separate client process (``benchmarks.sse_readers.readers``: raw asyncio streams, so the client
costs little beside the server) opens 10 readers per session (1,000 for 100 sessions), all from
seq 0, and says when all have their response headers. Then the benchmark runs 3 turns back to
back on every session (``POST /threads/{id}/runs/wait``). Each reader ends after the last turn's
``turn.completed``. For every delta event a reader receives: delivery latency = the client's
receive time (epoch ms) minus the event's ``at`` (stamped when the server emitted it, on the
same machine's clock; the window's gathering before it, at most 50 ms, is not in it):
p50/p99/max. The server's CPU seconds (``/proc/<pid>/stat``) over the window from the first
turn to the last reader's end, and events delivered per second.
``--quick``: 5 sessions x 4 readers, one turn of 50 deltas 20 ms apart (figures mean nothing).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.cli import deliver
from benchmarks.harness.report import RESULTS_DIR, Report, Row, row
from benchmarks.harness.stats import Dist

__all__ = ["NAME", "PLOTS", "REPORT", "SseReadersReport", "run_suite"]

NAME = "sse_readers"
PLOTS: list[Any] = []
TARGET_P99_MS = 250.0


class SseReadersReport(Report):
    """``benchmarks/results/sse_readers.json``."""

    store: str
    sessions: int
    readers_per_session: int
    turns_each: int
    deltas_per_reply: int
    chunk_delay_ms: float
    max_streams: int
    latency: Dist
    """Receive time minus the event's ``at``, per delivered delta event."""
    delta_events: int
    events: int
    window_s: float
    events_per_s: float
    server_cpu_s: float
    client_cpu_s: float

    def summarise(self) -> list[Row]:
        """Delivery latency p99 against the target, then throughput and the server's CPU."""
        readers = self.sessions * self.readers_per_session
        return [
            row(f"SSE delivery latency p99, {readers:,} readers of {self.sessions} streaming sessions, one server",
                round(self.latency.p99_ms, 1), "ms", TARGET_P99_MS,
                note=f"p50 {self.latency.p50_ms:.1f} ms, max {self.latency.max_ms:.0f} ms over "
                     f"{self.delta_events:,} delta events (receive time - event at); --max-streams {self.max_streams}"),
            row(f"SSE events delivered/s, {readers:,} readers", round(self.events_per_s),
                "events/s", note=f"server CPU {self.server_cpu_s:.1f} s over {self.window_s:.1f} s "
                                 f"({self.server_cpu_s / self.window_s:.2f} cores); client {self.client_cpu_s:.1f} s"),
        ]  # fmt: skip

    def render(self) -> str:
        """The summary lines printed after a run."""
        return "\n".join(f"  {r.figure}: {r.value} {r.unit}  {r.note}" for r in self.rows())


REPORT = SseReadersReport


def run_suite(quick: bool, out_dir: Path = RESULTS_DIR, peers: bool = True) -> SseReadersReport:
    """The suite's entry: measure through a real server and client, print, write ``out_dir/sse_readers.json``."""
    from benchmarks.sse_readers.serve import measure

    report = measure(quick)
    deliver(report, out_dir / f"{NAME}.json")
    return report
