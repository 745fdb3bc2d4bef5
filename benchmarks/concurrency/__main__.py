"""``python -m benchmarks.concurrency [--quick] [--no-ray] [--out PATH]`` (see ``benchmarks.concurrency``)."""

from __future__ import annotations

import benchmarks.concurrency as bench
from benchmarks.concurrency.workload import measure
from benchmarks.harness.cli import deliver, parser

p = parser(bench.NAME, bench.__doc__, "10 and 50 sessions, local only (seconds)")
p.add_argument("--no-ray", action="store_true", help="the local backend only")
args = p.parse_args()
deliver(measure(args.quick, with_ray=not args.no_ray), args.out)
