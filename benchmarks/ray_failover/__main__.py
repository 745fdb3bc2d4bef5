"""``python -m benchmarks.ray_failover [--quick] [--out PATH]`` (see ``benchmarks.ray_failover``)."""

from __future__ import annotations

from benchmarks.harness.cli import deliver, parser
from benchmarks.ray_failover import NAME, __doc__
from benchmarks.ray_failover.scenario import measure

args = parser(NAME, __doc__, "50 sessions, 4 running turns (seconds)").parse_args()
deliver(measure(args.quick), args.out)
