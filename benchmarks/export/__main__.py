"""``python -m benchmarks.export [--quick] [--entries N] [--keep DIR] [--out PATH]`` (see ``benchmarks.export``)."""

from __future__ import annotations

from pathlib import Path

import benchmarks.export as bench
from benchmarks.export.workload import measure
from benchmarks.harness.cli import deliver, parser

p = parser(bench.NAME, bench.__doc__, "100,000 entries instead of 1,000,000")
p.add_argument("--entries", type=int, default=None, help="history entries in the store")
p.add_argument("--keep", type=Path, default=None, help="build the store and export in this folder")
args = p.parse_args()
entries = args.entries or (100_000 if args.quick else 1_000_000)
deliver(measure(entries, "quick" if args.quick else "full", args.keep), args.out)
