"""``python -m benchmarks.steps [--quick] [--steps N] [--repeats N] [--no-langgraph-async] [--out PATH]``."""

from __future__ import annotations

from benchmarks.harness.cli import deliver, parser
from benchmarks.steps import NAME, __doc__
from benchmarks.steps.run import DEFAULT_STEPS, QUICK_STEPS, RUN_LENGTHS, measure

p = parser(NAME, __doc__, f"{QUICK_STEPS} steps, one round (a smoke run)")
p.add_argument("--steps", type=int, default=None, help=f"tool steps per run (default {DEFAULT_STEPS:,})")
p.add_argument("--repeats", type=int, default=None, help="rounds of repertory runs (default 3, quick 1)")
p.add_argument("--no-langgraph-async", action="store_true", help="skip the AsyncSqliteSaver run")
args = p.parse_args()
steps = args.steps if args.steps is not None else (QUICK_STEPS if args.quick else DEFAULT_STEPS)
if steps < 1:
    p.error("--steps must be >= 1")
repeats = args.repeats if args.repeats is not None else (1 if args.quick else 3)
lengths = tuple(n for n in RUN_LENGTHS if n < steps)
deliver(measure(steps, args.quick, repeats, not args.no_langgraph_async, run_lengths=lengths), args.out)
