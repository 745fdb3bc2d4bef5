"""``python -m benchmarks.mcp_server [--quick] [--out PATH]`` (see ``benchmarks.mcp_server``)."""

from __future__ import annotations

import benchmarks.mcp_server as bench
from benchmarks.harness.cli import deliver, parser
from benchmarks.mcp_server.measure import measure

args = parser(bench.NAME, bench.__doc__, "2 blocks of 10 calls a kind (seconds; figures mean nothing)").parse_args()
deliver(measure(args.quick), args.out)
