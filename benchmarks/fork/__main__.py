"""``python -m benchmarks.fork [--quick] [--out PATH]`` (see ``benchmarks.fork``)."""

from __future__ import annotations

import benchmarks.fork as bench
from benchmarks.fork.workload import measure
from benchmarks.harness.cli import deliver, parser

args = parser(bench.NAME, bench.__doc__, "depths 10 to 1,000 only (seconds)").parse_args()
deliver(measure(args.quick), args.out)
