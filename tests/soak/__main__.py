"""``python -m tests.soak``: run one chaos soak and print its figures; exit 1 on any violation.

Exit status: 0 when the checker ran and found nothing and no accepted turn was lost; 1 when it found
violations, an accepted turn was lost or the fleet never quiesced; 2 when the checker is missing
(``tests/soak/checker.py``), since then nothing was proven. The outcome JSON is printed last on
stdout: ``python -m tests.soak.suite`` (what ``python -m benchmarks`` runs) reads its figures there.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from tests.soak.run import ChaosConfig, run_chaos


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run the soak, print the outcome."""
    parser = argparse.ArgumentParser(prog="python -m tests.soak", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="how long faults are injected (default 5)")
    parser.add_argument("--backend", choices=("local", "ray"), default="local")
    parser.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--seed", type=int, default=1, help="seeds the fault schedule, the workload and the models")
    parser.add_argument("--out", type=Path, default=None, help="run folder (default .repertory/chaos/<seed>)")
    args = parser.parse_args(argv)
    cfg = ChaosConfig(minutes=args.minutes, backend=args.backend, store=args.store, seed=args.seed, out=args.out)
    outcome = run_chaos(cfg, say=lambda m: print(m, file=sys.stderr, flush=True))
    print(json.dumps(asdict(outcome), indent=2))
    if outcome.violations is None:
        print(f"chaos: checker {outcome.checker}", file=sys.stderr)
        return 2
    bad = outcome.violations or outcome.accepted_lost or not outcome.quiesced
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
