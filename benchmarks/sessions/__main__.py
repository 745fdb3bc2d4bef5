"""``python -m benchmarks.sessions [--quick] [--out PATH]`` (see ``benchmarks.sessions``).

Each part is this command too: ``--child SPEC --result PATH`` (a JSON spec; the figures go to PATH).
"""

from __future__ import annotations

import argparse
import json

from benchmarks.harness.cli import deliver, parser
from benchmarks.sessions import NAME, __doc__
from benchmarks.sessions.run import measure, run_part

p = parser(NAME, __doc__, "smaller N everywhere (a minute or two)")
p.add_argument("--child", help=argparse.SUPPRESS)
p.add_argument("--result", help=argparse.SUPPRESS)
args = p.parse_args()
if args.child:
    run_part(json.loads(args.child), args.result)
else:
    deliver(measure(args.quick), args.out)
