"""``python -m tests.soak.suite``: the chaos soaks ``python -m benchmarks`` runs, their figures as a pyperf suite.

Four soaks (the local and the Ray backend, each on SQLite and on PostgreSQL), 5 minutes of faults
each (``--quick``: 30 s), one after another, each a child ``python -m tests.soak`` (Ray needs a
process of its own). Per soak: the violations the checker found and the accepted turns lost
(target 0 each), the time from a fault to the fleet serving again, the turns, faults, recoveries
and decisions. The checker asserts; these are the figures of what it checked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from benchmarks.harness.command import Options, main
from benchmarks.harness.figures import Figures, Target
from benchmarks.harness.versions import ROOT

SOAKS = (("local", "sqlite"), ("local", "postgresql"), ("ray", "sqlite"), ("ray", "postgresql"))
SEED = 1


def _outcome(stdout: str) -> dict[str, Any] | None:
    """The outcome JSON ``python -m tests.soak`` prints last, or ``None`` when it printed none."""
    start = stdout.rfind("\n{")
    text = stdout[start + 1 :] if start >= 0 else stdout
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def _record(figures: Figures, soak: str, command: str, o: dict[str, Any]) -> None:
    """One soak's figures, each named after the soak."""
    zero = Target(0.0)  # none, whatever the faults
    if o["violations"] is None:
        figures.fact(f"{soak} checker", str(o["checker"]))
    else:
        figures.count(f"{soak}: violations", o["violations"], target=zero)
    figures.count(f"{soak}: accepted turns lost", o["accepted_lost"], target=zero)
    for q in ("p50", "p99"):
        if o[f"fault_to_serving_{q}_s"]:
            figures.time(f"{soak}: {q} fault -> fleet serving again", o[f"fault_to_serving_{q}_s"], command=command)
    figures.value(f"{soak}: turns", o["turns"], "turns", command=command,
                  note=f"{o['accepted']} accepted by the driver")  # fmt: skip
    for kind, n in sorted(o["faults"].items()):
        figures.count(f"{soak}: faults, {kind}", n)
    for kind, n in sorted(o["turns_by_status"].items()):
        figures.count(f"{soak}: turns {kind}", n)
    for kind, n in sorted(o["decisions"].items()):
        figures.count(f"{soak}: decisions {kind}", n)
    for name in ("accepted", "recoveries", "ledger_lines", "retried_errors", "store_full_errors", "quiesce_restarts"):
        figures.count(f"{soak}: {name.replace('_', ' ')}", o[name])
    figures.count(f"{soak}: unexpected exits", len(o["unexpected_exits"]))
    figures.fact(f"{soak} quiesced", "yes" if o["quiesced"] else "no")
    figures.fact(f"{soak} checker", str(o["checker"]))
    for kind, why in sorted(o["left_out"].items()):
        figures.fact(f"{soak} left out {kind}", why)


def scenario(figures: Figures, options: Options) -> None:
    """Each soak in turn; a soak that printed no outcome fails the run after the others ran."""
    minutes = "0.5" if options.quick else "5"
    missing = []
    for backend, store in SOAKS:
        args = ["--minutes", minutes, "--backend", backend, "--store", store, "--seed", str(SEED)]
        command = "python -m tests.soak " + " ".join(args)
        print(f"chaos: {command}", file=sys.stderr, flush=True)
        proc = subprocess.run([sys.executable, "-m", "tests.soak", *args], cwd=ROOT, capture_output=True, text=True,
                              check=False)  # fmt: skip  # exit 1/2 is in its outcome
        sys.stderr.write(proc.stderr[-4000:])
        outcome = _outcome(proc.stdout)
        if outcome is None:
            missing.append(f"{backend}+{store} (exit {proc.returncode})")
            continue
        _record(figures, f"{backend}+{store} {float(minutes):g} min", command, outcome)
    if missing:
        raise RuntimeError(f"no outcome from the soak(s): {', '.join(missing)}")


if __name__ == "__main__":
    main("chaos", __doc__, scenario=scenario)
