"""``python -m benchmarks.recovery [--quick] [--out PATH]`` (see ``benchmarks.recovery``).

The scenario's processes are this command too: ``--child workload|recover|recover-tuned|probe``.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import benchmarks.recovery as bench
from benchmarks.harness.cli import deliver, parser
from benchmarks.recovery.phases import probe, recover, workload
from benchmarks.recovery.scenario import measure
from repertory.runtime.gc_tuning import tune_gc

p = parser(bench.NAME, bench.__doc__, "100 suspended + 5 running (seconds)")
p.add_argument("--child", choices=("workload", "recover", "recover-tuned", "probe"), help=argparse.SUPPRESS)
p.add_argument("child_args", nargs="*", help=argparse.SUPPRESS)
args = p.parse_args()
if args.child == "workload":
    db, manifest, suspended, running = args.child_args
    asyncio.run(workload(Path(db), int(suspended), int(running), Path(manifest)))
elif args.child in ("recover", "recover-tuned"):
    db, manifest, out = args.child_args
    if args.child == "recover-tuned":
        tune_gc()  # what a process holding 10,000 sessions should do (repertory.runtime.gc_tuning)
    Path(out).write_text(asyncio.run(recover(Path(db), Path(manifest))).model_dump_json())
elif args.child == "probe":
    db, manifest, out = args.child_args
    Path(out).write_text(asyncio.run(probe(Path(db), Path(manifest))).model_dump_json())
else:
    deliver(measure(args.quick), args.out)
