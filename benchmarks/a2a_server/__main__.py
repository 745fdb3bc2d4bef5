"""``python -m benchmarks.a2a_server [--quick] [--out PATH]`` (see ``benchmarks.a2a_server``)."""

from __future__ import annotations

import benchmarks.a2a_server as bench
from benchmarks.a2a_server.measure import measure
from benchmarks.harness.cli import main_of

main_of(bench.NAME, bench.__doc__, "2 blocks of 10 calls a kind (seconds; figures mean nothing)", measure, None)
