"""Group commit benchmark: aggregate model steps/s of 1,000 concurrent sessions, group commit on and off.

Run ``python -m benchmarks.group_commit [--quick] [--no-postgres]``. It prints a table and writes
``benchmarks/results/group_commit.json`` (machine, load average before and after, every round).
Nothing here asserts a speed (DESIGN.md, rule 8); the targets are read against the figures.

The workload (issue 8): N sessions (1,000; ``--quick`` 200) launched at once with
``asyncio.gather``, each ``Session.start()`` of one run whose zero-delay ``ScriptedModel`` calls a
tool K times (10; quick 4) and then replies, so a run makes K + 1 model requests; "model steps/s" is
all sessions' model requests over the wall time from launch to the last reply. The headline tool is
the default ``@tool`` (not idempotent: its call is committed before it runs, then the step, so two
commits a step, as in ``benchmarks.steps``). Also timed: ``@tool(idempotent=True)`` (one commit a
step); a model that hands the event loop over once per request (``asyncio.sleep(0)``, as a real
client does: a zero-delay model that never yields makes the sessions run one after another when
every commit is inline, so only with group commit on are a thousand sessions in flight at once,
with their memory and the garbage collector's work that goes with it); the cyclic garbage collector
disabled while timed (an application's choice, not the library's: it shows the collector's share);
and ``durability="full"`` (a sync per transaction).

Group commit on and off run in the same process, alternating round by round (on, off, off, on, ...)
on a fresh database each, so a change in the machine's load hits both; each figure is the median of
its rounds, and the ratio is median on over median off. CPU time per step (``time.process_time``)
is given beside wall time because this machine is shared: it is less disturbed by other processes.
The garbage collector's time is measured (``gc.callbacks``) and reported as a share, since cProfile
bills it to whatever function was running.

Lone commits, where group commit can only cost: one writer committing one engine step at a time
(``EngineSession``, a 1 KB message), latency p50 / p99 on and off; and one session alone running
500 steps. PostgreSQL (full mode, a throwaway local server, ``synchronous_commit=on``) runs the
session workload on and off too. One extra round on and off of the headline runs under cProfile,
grouped by layer with the garbage collector off (its share is measured on the timed rounds), to
show where the time goes.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psycopg

from benchmarks._group_commit_work import (
    SessionsRound,
    alternate,
    lone_commits,
    lone_session,
    profile_categories,
    sessions_round,
)
from benchmarks._suite import RESULTS_DIR, finish, row, start_report, suite_entry, write_report
from repertory.core.store import SessionStore
from repertory.errors import StoreError
from repertory.storage.postgres.store import PostgresSessionStore
from repertory.storage.sqlite.store import Durability, SqliteSessionStore
from repertory.testing.pg_temp import TemporaryPostgres

__all__ = ["main", "measure", "run", "run_suite"]

NAME = "group_commit"
TARGET_STEPS_PER_S = 20_000
TARGET_RATIO = 3.0
_PG_TABLES = "repertory.runs, repertory.threads, repertory.history_entries, repertory.history_revisions"


@dataclass(frozen=True)
class Variant:
    """One session workload on one backend."""

    label: str
    backend: str  # "sqlite" or "postgres"
    durability: Durability
    idempotent: bool
    yields: bool = False  # the model hands the loop over once per request, as a real client does
    gc_off: bool = False  # the cyclic garbage collector disabled while timed (an application's choice)
    gc_tuned: bool = False  # the process calls repertory's tune_gc() (rarer collections)


HEADLINE = Variant("SQLite, @tool (2 commits/step)", "sqlite", "normal", False)
VARIANTS = (
    HEADLINE,
    Variant("SQLite, @tool(idempotent=True) (1 commit/step)", "sqlite", "normal", True),
    Variant("SQLite, @tool, model yields once per request", "sqlite", "normal", False, yields=True),
    Variant("SQLite, @tool, cyclic GC disabled while timed", "sqlite", "normal", False, gc_off=True),
    Variant("SQLite, @tool, the process calls tune_gc()", "sqlite", "normal", False, gc_tuned=True),
    Variant("SQLite durability=full, @tool (2 commits/step)", "sqlite", "full", False),
)
PG_VARIANT = Variant("PostgreSQL, @tool (2 commits/step)", "postgres", "normal", False)


@dataclass(frozen=True)
class Plan:
    """Sizes of one mode."""

    sessions: int = 1_000
    steps: int = 10
    rounds: int = 3
    variants: tuple[Variant, ...] = VARIANTS
    lone_commits: int = 3_000
    lone_steps: int = 500
    lone_rounds: int = 6
    postgres: bool = True
    pg_rounds: int = 3
    profile: bool = True


FULL = Plan()
QUICK = Plan(
    sessions=200, steps=4, rounds=1, variants=(HEADLINE,), lone_commits=300, lone_steps=40, lone_rounds=2,
    postgres=False, profile=False,
)  # fmt: skip


class Stores:
    """Fresh stores for each round: a new SQLite file, or an emptied PostgreSQL database."""

    def __init__(self, folder: Path, pg_url: str | None) -> None:
        self.folder = folder
        self.pg_url = pg_url

    async def open(self, variant: Variant, group_commit: bool) -> SessionStore:
        """A fresh, empty store for ``variant`` with group commit ``group_commit``."""
        if variant.backend == "postgres":
            assert self.pg_url is not None
            with psycopg.connect(self.pg_url, autocommit=True) as conn:
                if conn.execute("SELECT to_regclass('repertory.runs') IS NOT NULL").fetchone() == (True,):
                    conn.execute(f"TRUNCATE {_PG_TABLES}")
            return await PostgresSessionStore.open(self.pg_url, group_commit=group_commit)
        path = self.folder / f"{uuid.uuid4().hex[:10]}.db"
        return await SqliteSessionStore.open(path, durability=variant.durability, group_commit=group_commit)

    def clean(self) -> None:
        """Delete the SQLite files of finished rounds (a 1,000-session round leaves ~20 MB)."""
        for path in self.folder.glob("*.db*"):
            path.unlink(missing_ok=True)


def _median(rounds: list[SessionsRound], field: str) -> float:
    return float(statistics.median(getattr(r, field) for r in rounds))


def _side(rounds: list[SessionsRound]) -> dict[str, Any]:
    gc_share = statistics.median(r.gc_seconds / r.seconds for r in rounds)
    batches = [r.mean_batch for r in rounds if r.mean_batch is not None]
    return {
        "steps_per_s": _median(rounds, "steps_per_s"),
        "cpu_us_per_step": _median(rounds, "cpu_us_per_step"),
        "wall_us_per_step": 1e6 / _median(rounds, "steps_per_s"),
        "gc_share_of_wall": gc_share,
        "mean_batch": statistics.median(batches) if batches else None,
        "rounds": [r.as_dict() for r in rounds],
    }


async def _variant(stores: Stores, plan: Plan, variant: Variant, rounds: int) -> dict[str, Any]:
    async def work(store: SessionStore, on: bool) -> SessionsRound:
        return await sessions_round(
            store,
            on,
            plan.sessions,
            plan.steps,
            variant.idempotent,
            yields=variant.yields,
            gc_off=variant.gc_off,
            gc_tuned=variant.gc_tuned,
        )

    # An untimed warm-up of each side (imports, validators, statement caches).
    await alternate(1, lambda on: stores.open(variant, on), lambda s, on: sessions_round(s, on, 20, 2, False))
    found = await alternate(rounds, lambda on: stores.open(variant, on), work)
    stores.clean()
    on, off = _side(found[True]), _side(found[False])
    return {
        "variant": variant.label,
        "backend": variant.backend,
        "durability": variant.durability,
        "idempotent_tool": variant.idempotent,
        "model_yields": variant.yields,
        "gc_disabled_while_timed": variant.gc_off,
        "tune_gc": variant.gc_tuned,
        "sessions": plan.sessions,
        "tool_steps_per_run": plan.steps,
        "model_steps_per_run": plan.steps + 1,
        "on": on,
        "off": off,
        "ratio_on_over_off": on["steps_per_s"] / off["steps_per_s"],
        "cpu_ratio_off_over_on": off["cpu_us_per_step"] / on["cpu_us_per_step"],
    }


async def _lone(stores: Stores, plan: Plan) -> dict[str, Any]:
    variant = replace(HEADLINE, label="SQLite, one writer")
    commits = await alternate(
        plan.lone_rounds, lambda on: stores.open(variant, on), lambda s, on: lone_commits(s, plan.lone_commits)
    )
    runs = await alternate(
        plan.lone_rounds,
        lambda on: stores.open(variant, on),
        lambda s, on: lone_session(s, on, plan.lone_steps, False),
    )
    stores.clean()

    def med(samples: list[dict[str, float]], key: str) -> float:
        return float(statistics.median(s[key] for s in samples))

    out: dict[str, Any] = {"commit_message_bytes": 1024, "commits_per_round": plan.lone_commits}
    for on, side in ((True, "on"), (False, "off")):
        out[side] = {
            **{k: med(commits[on], k) for k in ("p50_us", "p90_us", "p99_us", "mean_us", "commits_per_s")},
            "session_steps_per_s": med(runs[on], "steps_per_s"),
            "rounds": {"commits": commits[on], "session": runs[on]},
        }
    out["p50_on_minus_off_us"] = out["on"]["p50_us"] - out["off"]["p50_us"]
    return out


async def _profile(stores: Stores, plan: Plan, walls: dict[bool, float]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for on in (True, False):
        profile = cProfile.Profile()
        store = await stores.open(HEADLINE, on)
        try:
            # The collector off: cProfile would bill its pauses to whichever function allocated last;
            # its share is measured apart, on the timed rounds (``gc_share_of_wall``).
            result = await sessions_round(
                store, on, plan.sessions, plan.steps, HEADLINE.idempotent, profile, gc_off=True
            )
        finally:
            await store.close()
        out["on" if on else "off"] = profile_categories(profile, result.model_steps, walls[on])
    stores.clean()
    return out


async def _measure(plan: Plan) -> dict[str, Any]:
    report: dict[str, Any] = {"sqlite": [], "postgres": None}
    with tempfile.TemporaryDirectory(prefix="repertory-group-commit-") as folder:
        stores = Stores(Path(folder), None)
        for variant in plan.variants:
            report["sqlite"].append(await _variant(stores, plan, variant, plan.rounds))
        report["lone"] = await _lone(stores, plan)
        if plan.profile:
            head = report["sqlite"][0]
            walls = {True: head["on"]["wall_us_per_step"], False: head["off"]["wall_us_per_step"]}
            report["profile"] = await _profile(stores, plan, walls)
        if plan.postgres:
            try:
                server = TemporaryPostgres()
            except StoreError as exc:
                report["postgres"] = {"skipped": str(exc)}
            else:
                with server:
                    pg = Stores(Path(folder), server.url)
                    report["postgres"] = await _variant(pg, plan, PG_VARIANT, plan.pg_rounds)
    return report


def _summary(report: dict[str, Any]) -> list[dict[str, Any]]:
    head = report["sqlite"][0]
    on, off = head["on"], head["off"]
    n = f"{head['sessions']:,} sessions"
    rows = [
        row(f"group commit: model steps/s, {n}, {head['variant']}", round(on["steps_per_s"]), "steps/s",
            TARGET_STEPS_PER_S, at_most=False,
            note=f"off: {off['steps_per_s']:,.0f}; CPU {on['cpu_us_per_step']:.0f} vs {off['cpu_us_per_step']:.0f} "
            f"us/step; mean batch {on['mean_batch'] or 0:.0f}"),
        row(f"group commit: on/off ratio, {n}, {head['variant']}", round(head["ratio_on_over_off"], 2), "x",
            TARGET_RATIO, at_most=False, note="same run, alternating rounds"),
    ]  # fmt: skip
    for v in report["sqlite"][1:] + ([report["postgres"]] if (report.get("postgres") or {}).get("on") else []):
        rows.append(row(f"group commit: model steps/s, {v['variant']}", round(v["on"]["steps_per_s"]), "steps/s",
                        note=f"off {v['off']['steps_per_s']:,.0f}: {v['ratio_on_over_off']:.2f}x"))  # fmt: skip
    lone = report["lone"]
    rows.append(row("group commit: lone commit latency p50, on", round(lone["on"]["p50_us"], 1), "us",
                    note=f"off {lone['off']['p50_us']:.1f} us; p99 on/off {lone['on']['p99_us']:.0f}/"
                    f"{lone['off']['p99_us']:.0f} us"))  # fmt: skip
    return rows


def render(report: dict[str, Any]) -> str:
    """The table printed after a run."""
    m = report["machine"]
    lines = [
        f"group commit ({report['mode']}) - {m['cpu_count']} CPUs, Python {m['python']}, SQLite {m['sqlite_version']}; "
        f"load average before/after {m['load_average_before'][0]:.2f}/{m['load_average_after'][0]:.2f}",
        f"{'workload':<50} {'on steps/s':>11} {'off steps/s':>12} {'ratio':>6} {'CPU us/step on/off':>19} "
        f"{'batch':>6} {'GC on/off':>10}",
    ]
    variants = report["sqlite"] + ([report["postgres"]] if (report.get("postgres") or {}).get("on") else [])
    for v in variants:
        on, off = v["on"], v["off"]
        lines.append(
            f"{v['variant']:<50} {on['steps_per_s']:>11,.0f} {off['steps_per_s']:>12,.0f} "
            f"{v['ratio_on_over_off']:>5.2f}x {on['cpu_us_per_step']:>9.0f}/{off['cpu_us_per_step']:<9.0f} "
            f"{on['mean_batch'] or 0:>6.0f} {on['gc_share_of_wall']:>4.0%}/{off['gc_share_of_wall']:<4.0%}"
        )
    if (report.get("postgres") or {}).get("skipped"):
        lines.append(f"PostgreSQL: not measured: {report['postgres']['skipped']}")
    lone = report["lone"]
    for side in ("on", "off"):
        s = lone[side]
        lines.append(
            f"lone writer, group commit {side:<3}: commit p50 {s['p50_us']:.1f} us, p99 {s['p99_us']:.1f} us, "
            f"{s['commits_per_s']:,.0f} commits/s; one session alone {s['session_steps_per_s']:,.0f} steps/s"
        )
    for side, prof in (report.get("profile") or {}).items():
        top = ", ".join(f"{k} {v['share']:.0%}" for k, v in list(prof["categories"].items())[:5])
        lines.append(f"profile, group commit {side}: {top}")
    return "\n".join(lines)


def measure(quick: bool, *, postgres: bool = True, plan: Plan | None = None) -> dict[str, Any]:
    """Measure every series, print the table and return the report."""
    chosen = plan or (QUICK if quick else FULL)
    if not postgres:
        chosen = replace(chosen, postgres=False)
    started = time.perf_counter()
    report = start_report(
        NAME,
        "quick" if quick else "full",
        durability="SQLite normal = WAL + synchronous=NORMAL, full = synchronous=FULL; "
        "PostgreSQL synchronous_commit=on",
        targets={"steps_per_s": TARGET_STEPS_PER_S, "ratio_on_over_off": TARGET_RATIO},
        plan={k: v for k, v in chosen.__dict__.items() if k != "variants"},
    )
    report.update(asyncio.run(_measure(chosen)))
    report["summary"] = _summary(report)
    finish(report, started)
    print(render(report))
    return report


async def run(quick: bool) -> dict[str, Any]:
    """Measure in a worker thread (this loop keeps running) and write ``results/group_commit.json``."""
    report = await asyncio.to_thread(measure, quick)
    write_report(report, RESULTS_DIR / f"{NAME}.json")
    return report


run_suite = suite_entry(NAME, measure)


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, measure, print the table and write the JSON report."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.group_commit", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 sessions, SQLite only, one round (seconds)")
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL series")
    parser.add_argument("--sessions", type=int, help="concurrent sessions (default 1,000; quick 200)")
    parser.add_argument("--steps", type=int, help="tool steps per run (default 10; quick 4)")
    parser.add_argument("--rounds", type=int, help="rounds on and off per workload (default 3; quick 1)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / f"{NAME}.json", help="JSON report path")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    sizes = {"sessions": args.sessions, "steps": args.steps, "rounds": args.rounds}
    plan = replace(plan, **{k: v for k, v in sizes.items() if v is not None})
    report = measure(args.quick, postgres=not args.no_postgres, plan=plan)
    print(f"wrote {write_report(report, args.out)} (load average now {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
