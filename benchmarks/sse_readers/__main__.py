"""``python -m benchmarks.sse_readers [--quick] [--out PATH]`` (see ``benchmarks.sse_readers``)."""

from __future__ import annotations

import benchmarks.sse_readers as bench
from benchmarks.harness.cli import deliver, parser
from benchmarks.sse_readers.serve import measure

args = parser(bench.NAME, bench.__doc__, "5 sessions x 4 readers, one short turn (figures mean nothing)").parse_args()
deliver(measure(args.quick), args.out)
