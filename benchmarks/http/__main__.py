"""``python -m benchmarks.http [--quick] [--no-ray] [--out PATH]`` (see ``benchmarks.http``)."""

from __future__ import annotations

import benchmarks.http as bench
from benchmarks.harness.cli import deliver, parser
from benchmarks.http.server import measure

p = parser(bench.NAME, bench.__doc__, "20 rounds, 5 clients, local only (seconds)")
p.add_argument("--no-ray", action="store_true", help="measure the local backend only")
args = p.parse_args()
deliver(measure(args.quick, ray=not args.no_ray), args.out)
