"""``python -m benchmarks.turns [--quick] [--no-ray] [--skip-peers] [--out PATH]`` (see ``benchmarks.turns``)."""

from __future__ import annotations

import benchmarks.turns as bench
from benchmarks.harness.cli import deliver, parser
from benchmarks.turns.run import measure

p = parser(bench.NAME, bench.__doc__, "300 sessions, Ray with 200 (about a minute)")
p.add_argument("--no-ray", action="store_true", help="leave out Ray on PostgreSQL")
p.add_argument("--skip-peers", action="store_true", help="leave out the LangGraph comparison")
args = p.parse_args()
deliver(measure("quick" if args.quick else "full", not args.skip_peers, not args.no_ray), args.out)
