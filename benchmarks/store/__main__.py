"""``python -m benchmarks.store [--quick] [--only sqlite|postgres] [--out PATH]`` (see ``benchmarks.store``).

``--only`` measures one backend and replaces only its part of an existing report at ``--out``.
"""

from __future__ import annotations

from benchmarks.harness.cli import deliver, parser
from benchmarks.store import NAME, __doc__
from benchmarks.store.report import StoreReport
from benchmarks.store.run import measure, merge

p = parser(NAME, __doc__, "fewer commits and runs (a smoke run, noisier)")
p.add_argument(
    "--only", choices=("sqlite", "postgres"), help="measure one backend; the other's figures in --out are kept"
)
args = p.parse_args()
report = measure(args.quick, args.only)
if args.only and args.out.exists():
    report = merge(StoreReport.model_validate_json(args.out.read_text()), report, args.only)
deliver(report, args.out)
