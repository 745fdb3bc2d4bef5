"""``python -m benchmarks.ray [--quick] [--only overhead,load,create,memory,events,crash] [--out PATH]``."""

from __future__ import annotations

from benchmarks.harness.cli import deliver, parser
from benchmarks.ray import NAME, __doc__
from benchmarks.ray.run import PARTS, measure

p = parser(NAME, __doc__, "smaller sizes (1,000 sessions for memory and crash)")
p.add_argument("--only", default=None, help=f"comma-separated parts: {','.join(PARTS)}")
args = p.parse_args()
deliver(measure(args.quick, set(args.only.split(",")) if args.only else None), args.out)
