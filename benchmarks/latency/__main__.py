"""``python -m benchmarks.latency [--quick] [--out PATH]`` (see ``benchmarks.latency``)."""

from __future__ import annotations

import benchmarks.latency as bench
from benchmarks.harness.cli import deliver, parser
from benchmarks.latency.workload import measure

args = parser(bench.NAME, bench.__doc__, "SQLite only, few commits (seconds)").parse_args()
deliver(measure(args.quick), args.out)
