"""``python -m benchmarks.memory [--quick] [--backends ...] [--rounds N] [--out PATH]`` (see ``benchmarks.memory``)."""

from __future__ import annotations

import benchmarks.memory as bench
from benchmarks.harness.cli import deliver, parser
from benchmarks.memory.recall import QUICK_SIZES, SIZES, measure

p = parser(bench.NAME, bench.__doc__, "1,000 and 10,000 messages, memory and SQLite, 30 rounds")
p.add_argument("--backends", default=None, help="comma-separated: memory,sqlite,postgres")
p.add_argument("--rounds", type=int, default=None, help="timed calls per latency figure")
args = p.parse_args()
backends = (args.backends or ("memory,sqlite" if args.quick else "memory,sqlite,postgres")).split(",")
sizes = QUICK_SIZES if args.quick else SIZES
rounds = args.rounds or (30 if args.quick else 200)
report = measure(backends, sizes, rounds, wide=not args.quick, mode="quick" if args.quick else "full")
deliver(report, args.out)
