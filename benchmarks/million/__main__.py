"""``python -m benchmarks.million [--sessions N] [--quick] [--out PATH]`` (see ``benchmarks.million``).

Each host child is this command too: ``--child SPEC --result PATH`` (a JSON spec; the figures go to PATH).
"""

from __future__ import annotations

import argparse
import json

from benchmarks.harness.cli import deliver, parser
from benchmarks.million import FULL, NAME, QUICK, __doc__
from benchmarks.million.run import measure, run_child

p = parser(NAME, __doc__, f"{QUICK:,} sessions (a minute)")
p.add_argument("--sessions", type=int, help=f"sessions in the database (default {FULL:,}; --quick {QUICK:,})")
p.add_argument("--samples", type=int, help="cold activations timed per kind (default 1,000; --quick 200)")
p.add_argument("--child", help=argparse.SUPPRESS)
p.add_argument("--result", help=argparse.SUPPRESS)
args = p.parse_args()
if args.child:
    run_child(json.loads(args.child), args.result)
else:
    deliver(measure(args.sessions or (QUICK if args.quick else FULL), quick=args.quick, samples=args.samples), args.out)
