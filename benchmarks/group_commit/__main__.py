"""``python -m benchmarks.group_commit [--quick] [--no-postgres] [--sessions N] [--steps N] [--rounds N]``."""

from __future__ import annotations

import os
from dataclasses import replace

import benchmarks.group_commit as bench
from benchmarks.group_commit.run import FULL, QUICK, measure
from benchmarks.harness.cli import deliver, parser

p = parser(bench.NAME, bench.__doc__, "200 sessions, SQLite only, one round (seconds)")
p.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL series")
p.add_argument("--sessions", type=int, help="concurrent sessions (default 1,000; quick 200)")
p.add_argument("--steps", type=int, help="tool steps per run (default 10; quick 4)")
p.add_argument("--rounds", type=int, help="rounds on and off per workload (default 3; quick 1)")
args = p.parse_args()
sizes = {"sessions": args.sessions, "steps": args.steps, "rounds": args.rounds}
plan = replace(QUICK if args.quick else FULL, **{k: v for k, v in sizes.items() if v is not None})
deliver(measure(args.quick, postgres=not args.no_postgres, plan=plan), args.out)
print(f"load average now {os.getloadavg()[0]:.2f}")
